"""The remediation evaluator: open health events × enabled policies → one decision each, acting only in "on" mode,
within the circuit breaker and the attempt caps (docs/health.md, "Remediation"). Keyword-only, no request."""

import math
import re
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from rest_framework import serializers

from apps.core import audit
from apps.core.choices import AuditAction
from apps.core.text import counted
from apps.deployments.kinds.gpu_reset import KIND as GPU_RESET
from apps.deployments.node_operations import KIND as SCHEDULER_ACTION
from apps.deployments.node_operations import scheduler_request
from apps.health.models import HealthEvent
from apps.health.services import open_events
from apps.inventory.choices import NodeRole, PowerState
from apps.inventory.models import Node, NvlinkSwitchTray, Rack
from apps.inventory.services import NodeChangeRefused, drain_nodes
from apps.jobs.services import TargetSpec, create_job
from apps.nodeexec.bmc import POWER_KIND as BMC_POWER
from apps.remediation import checkpoint, repairs, windows
from apps.remediation.choices import ESCALATION, TAKES_NODE_OUT, Action, Mode, Outcome
from apps.remediation.fabric import shared_leaf
from apps.remediation.models import MaintenanceWindow, RemediationDecision, RemediationPolicy
from apps.remediation.windows import describe as window_text
from apps.schedulers.commands import REASON_CHARACTERS

# Decisions that count as an action (an attempt, a node taken out); a deferred quarantine takes its node out soon.
DONE = (Outcome.ACTED, Outcome.WOULD_ACT, Outcome.DEFERRED)
NOT_IN_REASON = re.compile(rf"[^{REASON_CHARACTERS}]")  # what Slurm's reason placeholder refuses


def evaluate(*, now: datetime, transport: str | None = None, queue: bool = True) -> list[RemediationDecision]:
    """Decides, once per mode, what each enabled policy does about each open event it matches; returns the new
    decisions. An event decided only in shadow is decided again once the policy is on for its node (turned on, or
    its canary racks grown); one decided on is not decided again in shadow."""
    policies = list(RemediationPolicy.objects.filter(enabled=True).prefetch_related("canary_racks").order_by("pk"))
    if not policies:
        return []
    events = list(open_events().filter(first_seen__lte=now).select_related("node").order_by("first_seen", "pk"))
    decided = set(RemediationDecision.objects.filter(event__in=events).values_list("event_id", "policy_id", "mode"))
    made = []
    for event in events:
        for policy in policies:
            modes = {policy.mode_for(event.node), Mode.ON}
            if {(event.pk, policy.pk, mode) for mode in modes} & decided or not policy.matches(event):
                continue
            decision = _decide(event=event, policy=policy, now=now, transport=transport, queue=queue)
            if decision is not None:
                made.append(decision)
    return made


def _decide(*, event, policy, now, transport, queue) -> RemediationDecision | None:
    try:
        with transaction.atomic():
            # One evaluator at a time decides: the breaker's count must not be read by two at once.
            list(RemediationPolicy.objects.select_for_update().order_by("pk").values_list("pk", flat=True))
            decision = _plan(event=event, policy=policy, now=now)
            decision.save()  # the unique (event, policy, mode) refuses a second one, so nothing acts twice
            if decision.outcome == Outcome.ACTED:
                _act(decision, transport=transport, queue=queue)
            _open_repair(decision, transport=transport, queue=queue)
            return decision
    except IntegrityError:
        return None  # another evaluator decided about this event first


def _plan(
    *,
    event: HealthEvent,
    policy: RemediationPolicy,
    now: datetime,
    booked: MaintenanceWindow | None = None,
    instead_of: RemediationDecision | None = None,
) -> RemediationDecision:
    """The decision about the event, unsaved. `booked`: the window the action was deferred into, open now, so it runs
    in it; `instead_of`: the deferred decision this one is taken again for (not counted as an earlier attempt)."""
    node = event.node
    if node is None and policy.action == Action.POWER_OFF_TRAYS:
        node = leak_origin(event)  # a leak in a switch tray (in no node) endangers its domain's trays all the same
    mode = policy.mode_for(node)  # shadow outside its canary racks
    decision = RemediationDecision(
        event=event, policy=policy, node=event.node, kind=event.kind, mode=mode, action=policy.action,
        opens_repair=policy.action == Action.REPAIR, decided_at=now, outcome=Outcome.REFUSED,
    )  # fmt: skip
    if node is None and policy.action != Action.NOTIFY:
        decision.reason = f"{event.component_label} is in no node: nothing to {policy.action}; a person decides."
        return decision
    if node is not None:
        # Attempts count on the event's node; a leak in a switch tray (no node) on its own component, not on the
        # compute tray its power-off starts from.
        mine = Q(node=node) if event.node_id else Q(event__component_key=event.component_key)
        prior = RemediationDecision.objects.filter(mine, kind=event.kind, mode=mode, outcome__in=DONE)
        if instead_of is not None:
            prior = prior.exclude(pk=instead_of.pk)
        attempts = prior.count()
        decision.attempt = attempts + 1
        capped = policy.action != Action.POWER_OFF_TRAYS  # a leak powers its trays off however often it comes back
        if capped and attempts >= policy.max_attempts:  # back after its action: escalate
            decision.action, decision.escalated, decision.opens_repair = ESCALATION[policy.action], True, True
        window = windows.open_window(node=node, now=now)
        if window is not None and booked is None and decision.action != Action.NOTIFY:
            decision.reason = (
                f"{node.hostname} is in a maintenance window until {window.ends.isoformat()} ({window.reason}): "
                f"automation does not {decision.action} it; the people working on it decide."
            )[:500]
            return decision
        # A node that no longer answers is power-cycled all the same: its BMC event log is the evidence left.
        if decision.action in (Action.REBOOT, Action.GPU_RESET) and not repairs.evidence_ready(node):
            decision.reason = (
                f"{node.hostname} is in repair and its evidence is not captured yet: no {decision.action} before."
            )
            return decision
        if capped and attempts > policy.max_attempts:  # back after its escalation too: automation stops
            decision.reason = (
                f"Cap reached: {counted(attempts, 'action')} on {node.hostname} for {event.kind} already, escalation "
                "included; a person decides."
            )
            return decision
    if decision.action == Action.GPU_RESET and (event.gpu_id is None or not node.is_drained):
        decision.reason = (
            f"{event.component_label} is no GPU: nothing to reset; a person decides."
            if event.gpu_id is None
            else f"{node.hostname} is not drained: a GPU reset waits until it is (a quarantine policy drains it)."
        )[:500]
        return decision
    if decision.action == Action.POWER_OFF_TRAYS and not trays_on(node):
        decision.reason = f"{_trays_text(node)} are powered off already; nothing to do."[:500]
        return decision
    if decision.action in TAKES_NODE_OUT:
        if node.is_drained and decision.action == Action.QUARANTINE:  # a drained node may still be cycled or reset
            decision.reason = f"{node.hostname} is drained already ({node.drain_reason}); nothing to do."
            return decision
        tripped = _breaker(policy=policy, mode=mode, node=node, now=now)
        if tripped:
            decision.reason = tripped
            return decision
    decision.outcome = Outcome.WOULD_ACT if mode == Mode.SHADOW else Outcome.ACTED
    ahead = None
    if node is not None and booked is None and windows.deferrable(action=decision.action, severity=event.severity):
        ahead = windows.next_window(node=node, now=now)
    if ahead is not None:  # the time booked for work on the node: the action waits for it
        decision.window, decision.act_at = ahead, ahead.starts
        if mode == Mode.ON:
            decision.outcome = Outcome.DEFERRED
    hostname = node.hostname if node else ""
    what = {
        # The decision is the notice and the repair request: listed on the remediation page and its API.
        Action.NOTIFY: "notify the on-call",
        Action.QUARANTINE: f"drain {hostname} through the scheduler",
        Action.REBOOT: f"reboot {hostname} through the scheduler once its jobs end",
        Action.REPAIR: "open a repair",
        Action.POWER_OFF_TRAYS: f"power off {_trays_text(node, trays_on(node))} through their BMCs" if node else "",
        Action.POWER_CYCLE: f"power-cycle {hostname} through its BMC",
        Action.GPU_RESET: f"reset {event.component_label} (nvidia-smi -r)",
    }[decision.action]
    if ahead is not None:
        deferred = "Would defer" if mode == Mode.SHADOW else "Deferred"
        what = f"{deferred} into {window_text(ahead)}, then {what}"
    else:
        what = f"Would {what}" if mode == Mode.SHADOW else f"Started: {what}"
    escalated = f" (escalated from {policy.action}: attempt {decision.attempt})" if decision.escalated else ""
    repair = " and open a repair" if decision.opens_repair and decision.action != Action.REPAIR else ""
    decision.reason = f"{what}{repair}{escalated}: {event.summary}"[:500]
    return decision


def fleet_size() -> int:
    return Node.objects.filter(role=NodeRole.COMPUTE).count()


def breaker_limit(policy: RemediationPolicy, fleet: int) -> int:
    """The smaller of N nodes and P % of the fleet, never below one node (a small fleet still quarantines one)."""
    return max(1, min(policy.breaker_max_nodes, math.floor(float(policy.breaker_max_percent) * fleet / 100)))


BREAKER_TRIPPED = "Circuit breaker tripped"  # how a breaker refusal begins (the back-test counts them)
SUSPECT_LEAF = re.compile(r"behind leaf switch (?P<leaf>.+?): suspect the switch")


def _breaker(*, policy, mode, node, now) -> str:
    """Empty when the node may be taken out; else the refusal, naming a leaf switch every tripped node shares."""
    since = now - timedelta(minutes=policy.breaker_window_minutes)
    taken = set(
        RemediationDecision.objects.filter(
            mode=mode, action__in=TAKES_NODE_OUT, outcome__in=DONE, decided_at__gt=since, node__isnull=False
        ).values_list("node_id", flat=True)
    )
    if node.pk in taken:
        return ""
    fleet = fleet_size()
    limit = breaker_limit(policy, fleet)
    if len(taken) < limit:
        return ""
    tripped = Node.objects.filter(pk__in=taken | {node.pk})
    cause = shared_leaf(list(tripped))
    cause_text = f" All {len(taken) + 1} nodes are behind leaf switch {cause}: suspect the switch." if cause else ""
    return (
        f"{BREAKER_TRIPPED}: {counted(len(taken), 'node')} already taken out by automation in "
        f"{policy.breaker_window_minutes} min, the limit is {limit} ({policy.breaker_max_nodes} nodes or "
        f"{policy.breaker_max_percent} % of {fleet}); {node.hostname} left in service, a person decides.{cause_text}"
    )[:500]


def slurm_reason(event: HealthEvent) -> str:
    """The event as a drain reason Slurm and the command catalogue take: one line, no quote or shell character."""
    text = NOT_IN_REASON.sub(" ", f"rackpilot {event.kind}: {event.summary}")
    return re.sub(r" +", " ", text).strip()[:200]


def settle_deferred(*, now: datetime, transport: str | None = None, queue: bool = True) -> list[RemediationDecision]:
    """Drains the deferred quarantines whose job saved a checkpoint or whose deadline passed, and resumes the job
    around the node (apps/remediation/checkpoint.py); then runs the actions deferred into a maintenance window that
    has opened, and decides again those whose window was deleted before it opened."""
    drained = checkpoint.settle(
        now=now,
        act=lambda decision: _act_and_open_repair(decision, transport=transport, queue=queue),
        transport=transport,
        queue=queue,
    )
    return drained + _settle_windows(now=now, transport=transport, queue=queue)


# What a decision taken again in place of a deferred one changes (its event, policy, node and decided_at stay).
DECIDED_AGAIN = ("mode", "action", "escalated", "attempt", "opens_repair", "outcome")


def _settle_windows(*, now: datetime, transport, queue) -> list[RemediationDecision]:
    due = RemediationDecision.objects.filter(outcome=Outcome.DEFERRED, act_at__isnull=False).filter(
        Q(window__isnull=True) | Q(window__starts__lte=now)
    )
    settled = []
    for pk in due.order_by("act_at", "pk").values_list("pk", flat=True):
        with transaction.atomic():
            # As evaluate does: one evaluator at a time reads the breaker (policies first, then the decision).
            list(RemediationPolicy.objects.select_for_update().order_by("pk").values_list("pk", flat=True))
            decision = (
                RemediationDecision.objects.select_for_update(skip_locked=True, of=("self",))
                .select_related("event__node", "node", "policy", "window")
                .filter(pk=pk, outcome=Outcome.DEFERRED)
                .first()
            )
            if decision is None:
                continue  # another evaluator has it, or settled it
            _settle_window(decision, now=now, transport=transport, queue=queue)
            settled.append(decision)
    return settled


def _settle_window(decision: RemediationDecision, *, now: datetime, transport, queue) -> None:
    """The window opened: the action runs in it (the checks of the moment applied, the window's refusal excepted).
    The window was deleted (or ended) before the action could run in it: the action is decided again as the evaluator
    would now (at once, into another window, or refused)."""
    event, policy, booked = decision.event, decision.policy, decision.window
    gone = "deleted" if booked is None else "ended" if booked.ends <= now else ""
    if not event.is_open or not policy.enabled:
        gone = "its event was cleared" if not event.is_open else f"policy {policy.name} was turned off"
        decision.outcome = Outcome.REFUSED
        decision.reason = f"Not done: {gone} before the maintenance window opened. {decision.reason}"[:500]
        decision.save()
        return
    fresh = _plan(event=event, policy=policy, now=now, booked=None if gone else booked, instead_of=decision)
    for field in DECIDED_AGAIN:
        setattr(decision, field, getattr(fresh, field))
    if gone:
        decision.window, decision.act_at = fresh.window, fresh.act_at
        decision.reason = f"Its maintenance window was {gone} before it ran; decided again: {fresh.reason}"[:500]
    else:
        decision.reason = f"In {window_text(booked)}: {fresh.reason}"[:500]
    decision.save()
    if decision.outcome == Outcome.ACTED:
        # In the booked window it runs now; decided again, a quarantine may still wait for a training job's checkpoint.
        _act(decision, transport=transport, queue=queue, defer=bool(gone))
        _open_repair(decision, transport=transport, queue=queue)


def _act_and_open_repair(decision: RemediationDecision, *, transport, queue) -> None:
    _act(decision, transport=transport, queue=queue, defer=False)
    _open_repair(decision, transport=transport, queue=queue)


def _open_repair(decision: RemediationDecision, *, transport, queue) -> None:
    """A quarantine that acted, or a decision that opens a repair: the node's repair, opened or joined, and its
    evidence capture started at once, before anything reboots the node. A capture that cannot start leaves the repair
    open, saying so on its page (an operator starts it again there)."""
    if decision.outcome != Outcome.ACTED or not (decision.opens_repair or decision.action == Action.QUARANTINE):
        return
    repair = repairs.open_for_decision(decision)
    if repair is None or repair.evidence_captured_at is not None or repair.evidence_job_id:
        return
    try:
        with transaction.atomic():
            repairs.capture_evidence(repair=repair, transport=transport, queue=queue)
    except serializers.ValidationError as error:
        repair.notes = f"{repair.notes}\nEvidence capture could not start: {said(error)}".strip()[:5000]
        repair.save(update_fields=["notes", "updated"])


def _act(decision: RemediationDecision, *, transport, queue, defer: bool = True) -> None:
    """Starts what the decision says, in its transaction: a refused start rolls the drain back and records why."""
    node, event = decision.node, decision.event
    if decision.action == Action.POWER_OFF_TRAYS:
        _power_off(decision, transport=transport, queue=queue)
        return
    if decision.action in (Action.POWER_CYCLE, Action.GPU_RESET):
        _act_on_node(decision, transport=transport, queue=queue)
        return
    if decision.action not in (Action.QUARANTINE, Action.REBOOT):
        return  # notify and repair are the decision itself, read by people and the API
    if defer and decision.action == Action.QUARANTINE and checkpoint.defer(decision):
        decision.save()  # a node under a running training job: drained at the job's next checkpoint
        return
    try:
        with transaction.atomic():
            if decision.action == Action.QUARANTINE:
                # since the drain itself: a decision deferred to a checkpoint or a window drains later than it was made
                since = decision.drained_at or decision.act_at or decision.decided_at
                drain_nodes(nodes=[node], reason=slurm_reason(event), since=since)
                planned = scheduler_request(node)
                parameters, controller = planned["parameters"], planned["controller"]
            else:
                parameters = {
                    "scheduler": settings.RACKPILOT_SCHEDULER_KIND,
                    "action": "reboot",
                    "node": node.hostname,
                    "reason": slurm_reason(event),
                }
                controller = scheduler_request(node)["controller"]
            if controller is None:
                raise serializers.ValidationError({"targets": "No scheduler controller."})
            job = create_job(
                kind=SCHEDULER_ACTION,
                targets=TargetSpec(nodes=(controller.hostname,)),
                parameters=parameters,
                transport=transport,
                queue=queue,
            )
    except (serializers.ValidationError, NodeChangeRefused) as error:
        decision.outcome = Outcome.FAILED
        why = said(error) if isinstance(error, serializers.ValidationError) else str(error)
        decision.reason = f"Could not {decision.action} {node.hostname}, nothing changed: {why}"[:500]
    else:
        decision.job_id = job.public_id
        decision.reason = f"{decision.reason} (job {job.public_id})"[:500]
    decision.save()


# --- a coolant leak: the rack's trays powered off --------------------------------------------------------------------


def leak_origin(event: HealthEvent) -> Node | None:
    """The node a leak's power-off starts from (rack_trays of it are what it endangers): the event's node, else, for
    a leak an NVLink switch tray's BMC read (an event in no node, on the switch tray), the first compute tray of the
    switch tray's domain; None for neither."""
    if event.node_id:
        return event.node
    if event.nvlink_switch_tray_id:
        domain_id = NvlinkSwitchTray.objects.filter(pk=event.nvlink_switch_tray_id).values("domain_id")
        return Node.objects.filter(nvlink_domain_id__in=domain_id).order_by("tray_slot", "hostname").first()
    return None


def rack_leaks(rack: Rack):
    """The rack's open coolant events: those on its nodes' parts and those on its NVLink switch trays' leak
    sensors (in no node)."""
    return HealthEvent.objects.open().filter(Q(node__rack=rack) | Q(nvlink_switch_tray__domain__rack=rack))


def rack_trays(node: Node) -> list[Node]:
    """The trays a leak at the node endangers: every compute tray of its NVLink domain (the rack's loop), else the
    node alone."""
    if node.nvlink_domain_id:
        return list(Node.objects.filter(nvlink_domain_id=node.nvlink_domain_id).order_by("tray_slot", "hostname"))
    return [node]


def trays_on(node: Node) -> list[Node]:
    """Of the trays a leak at the node endangers, those a power-off acts on: all but those their BMC reads off."""
    return [tray for tray in rack_trays(node) if not tray.is_powered_off]


def _trays_text(node: Node, trays: list[Node] | None = None) -> str:
    """`trays` (all those a leak at the node endangers where None) in words: one by name, else how many of the
    rack's."""
    every = rack_trays(node)
    trays = every if trays is None else trays
    if len(trays) == 1:
        return trays[0].hostname
    rack = node.rack.name if node.rack_id else node.hostname
    if len(trays) == len(every):
        return f"the {len(every)} trays of rack {rack}"
    return f"{len(trays)} of the {len(every)} trays of rack {rack}"


def _leaks_text(node: Node) -> str:
    """Where the coolant leaks: the trays endangered with an open leak, each with the sensor that reads it."""
    in_switch_trays = Q(nvlink_switch_tray__domain_id=node.nvlink_domain_id) if node.nvlink_domain_id else Q()
    leaks = (
        HealthEvent.objects.open()
        .filter(Q(node__in=rack_trays(node)) | in_switch_trays, kind="coolant_leak")
        .select_related("node", "nvlink_switch_tray")
        .order_by("node__tray_slot", "node__hostname", "nvlink_switch_tray__slot", "pk")
    )
    return (
        ", ".join(f"{(leak.node or leak.nvlink_switch_tray)} ({leak.component_label})" for leak in leaks)
        or node.hostname
    )


def power_off_trays(*, node: Node, transport: str | None = None, queue: bool = True, requested_by=None):
    """Starts the `bmc-power` job that powers the node's rack's trays off (those not off already); its reason names
    the trays whose sensors read the leak and what is powered off. Raises serializers.ValidationError (naming the
    field) where the job is refused or every tray is off already, nothing started then."""
    trays = trays_on(node)
    if not trays:
        raise serializers.ValidationError({"targets": [f"{_trays_text(node)} are powered off already."]})
    return create_job(
        kind=BMC_POWER,
        targets=TargetSpec(nodes=tuple(tray.hostname for tray in trays)),
        parameters={
            "action": "off",
            "reason": f"coolant leak at {_leaks_text(node)}: powering off {_trays_text(node, trays)}"[:300],
        },
        transport=transport if transport in ("local", "sim") else None,  # a BMC is never reached over ssh
        requested_by=requested_by,
        queue=queue,
    )


def nodes_off(rack: Rack):
    """The rack's nodes that their BMCs read powered off: the trays of its NVLink domain a leak's power-off left off,
    and any other node (an air-cooled server) an operator or a job powered off."""
    return Node.objects.filter(rack=rack, power_state=PowerState.OFF).order_by("tray_slot", "hostname")


def _nodes_text(rack: Rack, nodes: list[Node]) -> str:
    """`nodes` of the rack in words: trays as _trays_text says them, else one by name or how many of the rack's."""
    if all(node.nvlink_domain_id for node in nodes):
        return _trays_text(nodes[0], nodes)
    return nodes[0].hostname if len(nodes) == 1 else f"{len(nodes)} nodes of rack {rack.name}"


def power_on_nodes(*, rack: Rack, transport: str | None = None, queue: bool = True, requested_by=None):
    """Starts the `bmc-power` job that powers the rack's nodes their BMCs read off back on (a leak mended, a server
    powered off by hand). Raises serializers.ValidationError (naming the field) where none is off or the job is
    refused; nothing started then."""
    nodes = list(nodes_off(rack))
    if not nodes:
        raise serializers.ValidationError({"targets": [f"No node of rack {rack.name} is powered off."]})
    return create_job(
        kind=BMC_POWER,
        targets=TargetSpec(nodes=tuple(node.hostname for node in nodes)),
        parameters={"action": "on", "reason": f"powering {_nodes_text(rack, nodes)} back on"[:300]},
        transport=transport if transport in ("local", "sim") else None,
        requested_by=requested_by,
        queue=queue,
    )


def _power_off(decision: RemediationDecision, *, transport, queue) -> None:
    origin = leak_origin(decision.event)
    try:
        with transaction.atomic():
            job = power_off_trays(node=origin, transport=transport, queue=queue)
    except serializers.ValidationError as error:
        decision.outcome = Outcome.FAILED
        decision.reason = f"Could not power off {_trays_text(origin)}, nothing started: {said(error)}"[:500]
    else:
        decision.job_id = job.public_id
        decision.reason = f"{decision.reason} (job {job.public_id})"[:500]
    decision.save()


def _act_on_node(decision: RemediationDecision, *, transport, queue) -> None:
    """A power cycle through the node's BMC (the `bmc-power` job, by its name: monitoring runs it) or a GPU reset on
    the drained node (`gpu-reset`); a job that cannot start (no BMC login, the node not drained) fails the decision,
    naming why. The power cycle is audited on the node, as an operator's is."""
    node, event = decision.node, decision.event
    if decision.action == Action.POWER_CYCLE:
        kind, parameters = BMC_POWER, {"action": "cycle", "reason": slurm_reason(event)}
        transport = transport if transport in ("local", "sim") else None  # a BMC is never reached over ssh
    else:
        kind, parameters = GPU_RESET, {"gpu_index": event.gpu.index, "reason": slurm_reason(event)}
    try:
        with transaction.atomic():
            job = create_job(
                kind=kind,
                targets=TargetSpec(nodes=(node.hostname,)),
                parameters=parameters,
                transport=transport,
                queue=queue,
            )
            if decision.action == Action.POWER_CYCLE:
                audit.record(
                    AuditAction.START,
                    obj=node,
                    object_repr=f"{node.hostname}: power cycle through the BMC",
                    changes={"bmc_power": "cycle", "reason": parameters["reason"], "remediation": event.kind},
                    job=job,
                )
    except serializers.ValidationError as error:
        decision.outcome = Outcome.FAILED
        decision.reason = f"Could not {decision.action} {node.hostname}, nothing changed: {said(error)}"[:500]
    else:
        decision.job_id = job.public_id
        decision.reason = f"{decision.reason} (job {job.public_id})"[:500]
    decision.save()


def said(error: serializers.ValidationError) -> str:
    """A refusal as one line: `field: message` for each."""
    detail = error.detail
    if not isinstance(detail, dict):
        return "; ".join(str(item) for item in (detail if isinstance(detail, list) else [detail]))
    return "; ".join(
        f"{name}: " + " ".join(str(item) for item in (value if isinstance(value, list) else [value]))
        for name, value in detail.items()
    )
