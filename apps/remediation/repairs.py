"""Repair and return (docs/health.md, "Repair and return"): a quarantine opens a repair; its evidence is captured
before any reboot; parts are recorded by serial; a validation chosen by the fault must pass before the node goes back
into service through the scheduler; a failed validation goes back to repair. Keyword-only, no request."""

import contextlib
import re
from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatchcase

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from rest_framework import serializers

from apps.benchmarks import services as benchmarks
from apps.benchmarks.choices import BurnLoad, RunStatus, Suite, Verdict
from apps.benchmarks.models import BenchmarkRun
from apps.core import audit
from apps.core.choices import AuditAction
from apps.core.text import counted
from apps.deployments.node_operations import start_scheduler_action
from apps.health import services as health
from apps.health.choices import NodeState, Source
from apps.health.models import HealthEvent
from apps.inventory.choices import NodeRole
from apps.inventory.models import Gpu, Node
from apps.inventory.services import NodeChangeRefused, drain_nodes, undrain_nodes
from apps.jobs.choices import JOB_ACTIVE, JobStatus, StepStatus
from apps.jobs.models import Job, JobStep
from apps.jobs.services import TargetSpec, create_job
from apps.remediation.choices import REPAIR_ACTIVE, GateKind, GateState, PartType, RepairState
from apps.remediation.fabric import shared_leaf
from apps.remediation.models import PartReplacement, RemediationDecision, Repair, RepairGate
from apps.remediation.signals import repair_returned, repair_validated

EVIDENCE_KIND = "repair-evidence"
SERIAL_PATTERN = r"^[!-~]{1,64}\Z"  # a part's serial as vendors print it: printable ASCII, no space
SERIAL = re.compile(SERIAL_PATTERN)
SERIAL_RULE = "A serial: 1 to 64 printable ASCII characters, no spaces."


@dataclass(frozen=True)
class GateRule:
    """Which faults a gate answers. `chosen_by`: the event kinds (globs, as remediation policies match them) whose
    faults wait for this gate. `also_clears`: beyond those, the kinds a passed gate vouches for on the node."""

    chosen_by: tuple[str, ...]
    also_clears: tuple[str, ...] = ()


# The validation each fault waits for, first match wins over the gates' `chosen_by` in this order (keep a more
# specific pattern before a broader one). A kind in none of them, or faults of several gates on one node, take the
# node's whole acceptance: both gates together. Every gate's runs reached the node over its transport: it answers
# again, so each also clears node_unreachable (the kernel-log read would say so later).
GATE_RULES: dict[str, GateRule] = {
    GateKind.LINK: GateRule(
        chosen_by=("link_*", "nic*", "cable*", "nccl_slow", "mtu_*", "pfc_*", "ecn_*", "ib_*"),
        also_clears=("node_unreachable",),
    ),
    GateKind.GPU: GateRule(
        chosen_by=("xid*", "ecc*", "gpu*", "burn_in*", "row_remap*"),
        # The BMC's records of the same faults (a bus fatal error under a GPU that fell off it, the watchdog and the
        # stop of the OS it hung) are answered by the GPU checks.
        also_clears=(
            "bmc_pcie_fatal", "bmc_gpu_memory_ecc", "bmc_watchdog", "bmc_os_critical_stop", "pcie_*",
            "node_unreachable",
        ),
    ),
}  # fmt: skip
# What each gate runs: the suites, in order. A link gate's pairwise NCCL reads the NICs' error counters around each
# round (the link counters); the GPU gate's nvbandwidth measures HBM (device-local copy) and NVLink (device to device).
GATE_SUITES = {
    GateKind.LINK: (Suite.PAIRWISE,),
    GateKind.GPU: (Suite.BURN_IN, Suite.NVBANDWIDTH),
    GateKind.ACCEPTANCE: (Suite.BURN_IN, Suite.NVBANDWIDTH, Suite.PAIRWISE),
}


class RepairRefused(serializers.ValidationError):
    """An action on a repair that cannot be done now: names the field, nothing changed."""

    def __init__(self, field: str, message: str):
        super().__init__({field: [message]})


# --- opening ------------------------------------------------------------------------------------------------------


def active_repair(node: Node) -> Repair | None:
    return Repair.objects.filter(node=node, state__in=REPAIR_ACTIVE).first()


def open_repair(
    *,
    node: Node,
    reason: str,
    events=(),
    decision: RemediationDecision | None = None,
    user=None,
    at: datetime | None = None,
) -> Repair:
    """The node's active repair with these events and decision joined to it, or a new one (audited)."""
    if not (reason or "").strip():
        raise RepairRefused("reason", "Say why the node needs a repair.")
    at = at or timezone.now()
    for _ in range(2):  # a parallel quarantine may open it between our read and our insert: then join that one
        try:
            with transaction.atomic():
                repair = Repair.objects.select_for_update().filter(node=node, state__in=REPAIR_ACTIVE).first()
                if repair is None:
                    repair = Repair.objects.create(
                        node=node,
                        reason=reason.strip()[:300],
                        opened_at=at,
                        opened_by=user if getattr(user, "pk", None) else None,
                    )
                _join(repair, events=list(events), decision=decision)
                return repair
        except IntegrityError:
            continue
    raise RuntimeError(f"Could not open a repair of {node.hostname}: its active repair kept changing.")


def _join(repair: Repair, *, events: list[HealthEvent], decision: RemediationDecision | None) -> None:
    known = set(repair.events.values_list("pk", flat=True))
    new = [event for event in events if event.pk not in known]
    if new:
        repair.events.add(*new)
        audit.record(
            AuditAction.UPDATE,
            obj=repair,
            changes={"events": [None, ", ".join(f"{event.kind} on {event.component_label}" for event in new)]},
        )
    if decision is not None:
        repair.decisions.add(decision)
    _choose_gate(repair)


def open_for_decision(decision: RemediationDecision) -> Repair | None:
    """A quarantine that acted, or a decision that opens a repair: the node's repair, opened or joined."""
    if decision.node is None:
        return None
    return open_repair(
        node=decision.node,
        reason=f"{decision.get_action_display().split(' (')[0]}: {decision.event.kind}: {decision.event.summary}",
        events=[decision.event],
        decision=decision,
        at=decision.decided_at,
    )


# --- the gate chosen by the fault -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gate:
    kind: str
    reason: str


def gate_for(kinds: list[str]) -> Gate:
    """The validation that the faults of these kinds wait for, with why."""
    matched: dict[str, list[str]] = {}
    unknown = []
    for kind in sorted(set(kinds)):
        rule = _chosen_by(kind)
        if rule is None:
            unknown.append(kind)
        else:
            matched.setdefault(rule[1], []).append(f"{kind} ({rule[0]})")
    if not kinds:
        return Gate(GateKind.ACCEPTANCE, "No fault named: the node's whole acceptance.")
    if unknown:
        return Gate(GateKind.ACCEPTANCE, f"No gate named for {', '.join(unknown)}: the node's whole acceptance.")
    if len(matched) > 1:
        faults = "; ".join(f"{gate}: {', '.join(items)}" for gate, items in sorted(matched.items()))
        return Gate(GateKind.ACCEPTANCE, f"Faults of several gates ({faults}): the node's whole acceptance.")
    ((gate, items),) = matched.items()
    return Gate(gate, f"{', '.join(items)} → {GateKind(gate).label}")


def _chosen_by(kind: str) -> tuple[str, str] | None:
    """The first pattern that chooses a gate for the kind (GATE_RULES in order), with that gate."""
    for gate, rule in GATE_RULES.items():
        for pattern in rule.chosen_by:
            if fnmatchcase(kind, pattern):
                return pattern, gate
    return None


def _choose_gate(repair: Repair) -> None:
    gate = gate_for(list(repair.events.values_list("kind", flat=True)))
    if (repair.gate_kind, repair.gate_reason) != (gate.kind, gate.reason[:300]):
        repair.gate_kind, repair.gate_reason = gate.kind, gate.reason[:300]
        repair.save(update_fields=["gate_kind", "gate_reason", "updated"])


def known_good_partner(node: Node) -> Node | None:
    """A healthy node on the same leaf switch, of the same GPU SKU, in service and not in repair: NCCL against it
    judges the repaired node's links alone."""
    candidates = (
        Node.objects.filter(role=NodeRole.COMPUTE, gpu_sku_id=node.gpu_sku_id, drained_at__isnull=True)
        .exclude(pk=node.pk)
        .exclude(repairs__state__in=REPAIR_ACTIVE)
        .order_by("hostname")
    )
    healthy = health.nodes_health(list(candidates))
    for candidate in candidates:
        if healthy[candidate.pk].state == NodeState.HEALTHY and shared_leaf([node, candidate]):
            return candidate
    return None


# --- evidence -----------------------------------------------------------------------------------------------------


def capture_evidence(*, repair: Repair, user=None, transport: str | None = None, queue: bool = True) -> Job:
    """Starts the `repair-evidence` job on the node: the bug report, the kernel log's fault lines, the BMC event log
    as recorded and the events' findings. Refused (nothing started) for a repair that is over or already capturing."""
    if not repair.is_active:
        raise RepairRefused("repair", f"The repair is {repair.get_state_display().lower()}: nothing to capture.")
    if repair.evidence_job_id and Job.objects.filter(public_id=repair.evidence_job_id, status__in=JOB_ACTIVE).exists():
        raise RepairRefused("repair", f"Evidence is being captured already (job {repair.evidence_job_id}).")
    with transaction.atomic():
        job = create_job(
            kind=EVIDENCE_KIND,
            targets=TargetSpec(nodes=(repair.node.hostname,)),
            parameters={"repair": str(repair.public_id)},
            transport=transport,
            requested_by=user,
            queue=queue,
        )
        repair.evidence_job_id = job.public_id
        repair.save(update_fields=["evidence_job_id", "updated"])
    return job


def bmc_log(node: Node) -> list[dict]:
    """The node's BMC event log as the health events recorded it (source bmc_log), newest first."""
    events = HealthEvent.objects.filter(node=node, source=Source.BMC_LOG).order_by("-last_seen")[:20]
    return [
        {"kind": e.kind, "summary": e.summary, "last_seen": e.last_seen.isoformat(), "open": e.is_open} for e in events
    ]


def findings(repair: Repair) -> list[dict]:
    """Each event of the repair with the lines and facts it cites."""
    return [
        {
            "event": str(event.public_id),
            "kind": event.kind,
            "component": event.component_label,
            "summary": event.summary,
            "lines": [line for item in event.evidence for line in item.get("lines", [])][:10],
        }
        for event in repair.events.order_by("first_seen", "pk")
    ]


def record_evidence(*, repair: Repair, bug_report: dict, kernel_log: dict, job: Job, at: datetime | None = None):
    """The packet, as the evidence job read it; the repair may now see its node rebooted. A kernel log that could
    not be read is no packet: the repair stays as it was and the job says why."""
    if not kernel_log.get("read"):
        with transaction.atomic():  # said on the repair, where the operator will look for it
            repair = Repair.objects.select_for_update().get(pk=repair.pk)
            why = kernel_log.get("note") or "the kernel log was not read"
            again = "Capture it again once it answers."
            _note(repair, None, f"Evidence capture failed (job {job.public_id}): {why}. {again}")
            repair.save()
        return None
    with transaction.atomic():
        repair = Repair.objects.select_for_update().get(pk=repair.pk)
        repair.evidence = {
            "job": str(job.public_id),
            "bug_report": bug_report,
            "kernel_log": kernel_log,
            "bmc_log": bmc_log(repair.node),
            "findings": findings(repair),
        }
        repair.evidence_captured_at = at or timezone.now()
        if repair.state == RepairState.OPEN:
            repair.state = RepairState.EVIDENCE_CAPTURED
        repair.save()  # audited
    return repair


def evidence_ready(node: Node) -> bool:
    """Whether the node may be rebooted or power-cycled: no active repair, or its evidence is captured."""
    return not Repair.objects.filter(node=node, state__in=REPAIR_ACTIVE, evidence_captured_at__isnull=True).exists()


# --- work on the node ---------------------------------------------------------------------------------------------


def start_work(*, repair: Repair, user, note: str = "") -> Repair:
    """The technician starts: evidence must be in (the work may reboot or open the node)."""
    if repair.state == RepairState.OPEN:
        raise RepairRefused("repair", "Capture the evidence first: a repair may reboot the node, which loses it.")
    if repair.state != RepairState.EVIDENCE_CAPTURED:
        raise RepairRefused("repair", f"The repair is {repair.get_state_display().lower()}, not waiting for work.")
    repair.state = RepairState.IN_REPAIR
    _note(repair, user, note or "Work started.")
    repair.save()
    return repair


def _note(repair: Repair, user, text: str) -> None:
    who = user.get_username() if getattr(user, "pk", None) else "automation"
    stamp = timezone.now().strftime("%Y-%m-%d %H:%M")
    repair.notes = f"{repair.notes}\n{stamp} {who}: {text.strip()}".strip()


def record_part(
    *,
    repair: Repair,
    component_type: str,
    new_serial: str,
    old_serial: str = "",
    gpu: Gpu | None = None,
    label: str = "",
    note: str = "",
    user=None,
    at: datetime | None = None,
) -> PartReplacement:
    """A part swapped on the repair's node. A GPU's new serial is written on the inventory's GPU (audited); the old
    serial defaults to the one the inventory had."""
    errors: dict[str, list[str]] = {}
    new_serial, old_serial = (new_serial or "").strip(), (old_serial or "").strip()
    if repair.state not in (RepairState.EVIDENCE_CAPTURED, RepairState.IN_REPAIR):
        errors["repair"] = ["Parts are recorded while the node is in repair, after its evidence is captured."]
    if component_type not in PartType.values:
        errors["component_type"] = [f"One of: {', '.join(PartType.values)}."]
    if component_type == PartType.GPU:
        if gpu is None:
            errors["gpu"] = ["Name the GPU (its index on the node) that was replaced."]
        elif gpu.node_id != repair.node_id:
            errors["gpu"] = [f"GPU {gpu.index} is not in {repair.node.hostname}."]
        else:
            old_serial = old_serial or gpu.serial
            label = f"GPU {gpu.index}"
    elif not (label or "").strip():
        errors["label"] = ["Name the part's slot (e.g. NIC ib0, PSU 2)."]
    if not SERIAL.match(new_serial):
        errors["new_serial"] = [SERIAL_RULE]
    elif new_serial == old_serial:
        errors["new_serial"] = ["The new serial is the old one: nothing was replaced."]
    if old_serial and not SERIAL.match(old_serial):
        errors["old_serial"] = [SERIAL_RULE]
    if errors:
        raise serializers.ValidationError(errors)
    with transaction.atomic():
        part = PartReplacement.objects.create(
            repair=repair,
            node=repair.node,
            component_type=component_type,
            gpu=gpu if component_type == PartType.GPU else None,
            component_label=label.strip()[:200],
            old_serial=old_serial,
            new_serial=new_serial,
            replaced_at=at or timezone.now(),
            replaced_by=user if getattr(user, "pk", None) else None,
            note=(note or "").strip()[:300],
        )
        if component_type == PartType.GPU:
            gpu.serial = new_serial
            gpu.save(update_fields=["serial", "updated"])  # audited: the inventory's serial follows the part
        if repair.state == RepairState.EVIDENCE_CAPTURED:
            repair.state = RepairState.IN_REPAIR
            repair.save(update_fields=["state", "updated"])
    return part


def part_history(serial: str) -> list[PartReplacement]:
    """Every replacement the serial was part of (taken out or put in), oldest first: the nodes and repairs it went
    through."""
    serial = (serial or "").strip()
    if not serial:
        return []
    return list(
        PartReplacement.objects.filter(Q(old_serial=serial) | Q(new_serial=serial))
        .select_related("node", "repair", "replaced_by")
        .order_by("replaced_at", "pk")
    )


# --- the gate -----------------------------------------------------------------------------------------------------


def start_validation(*, repair: Repair, user=None, note: str = "", transport: str | None = None) -> RepairGate:
    """Starts the gate the fault chose: its benchmark runs on the node (and a known-good partner for the links).
    `note`: the work done ("Repaired: validate now", one action when the technician is finished), kept in the
    repair's notes with the gate's start. A gate that cannot start (no partner, a suite refusing the node) says why
    and changes nothing: the repair stays in repair."""
    if repair.state not in (RepairState.EVIDENCE_CAPTURED, RepairState.IN_REPAIR):
        raise RepairRefused("repair", f"The repair is {repair.get_state_display().lower()}: nothing to validate now.")
    _choose_gate(repair)
    node, kind = repair.node, repair.gate_kind
    suites = GATE_SUITES[kind]
    parameters: dict = {"suites": list(suites)}
    partner = None
    if Suite.PAIRWISE in suites:
        partner = known_good_partner(node)
        if partner is None:
            raise RepairRefused(
                "gate",
                f"No known-good partner for {node.hostname}: no healthy node of its GPU SKU in service on its leaf "
                "switch. Free one, then start the validation again.",
            )
        parameters["partner"] = partner.hostname
    try:
        with transaction.atomic():
            gate = RepairGate.objects.create(
                repair=repair,
                kind=kind,
                parameters=parameters,
                started_at=timezone.now(),
                started_by=user if getattr(user, "pk", None) else None,
            )
            for suite in suites:
                gate.runs.add(_start_run(suite, node=node, partner=partner, user=user, transport=transport))
            repair.state = RepairState.VALIDATING
            done = f"Work done: {note.strip().rstrip('.')}. " if (note or "").strip() else ""
            label = GateKind(kind).label.split(":")[0]
            _note(repair, user, f"{done}Validation started ({label} gate): {', '.join(suites)}.")
            repair.save(update_fields=["state", "notes", "updated"])
    except serializers.ValidationError as error:
        raise RepairRefused("gate", f"The validation could not start, nothing changed: {_flat(error.detail)}") from None
    except IntegrityError:
        raise RepairRefused("gate", "A validation of this repair is running already.") from None
    return gate


def _flat(detail) -> str:
    if isinstance(detail, dict):
        return "; ".join(f"{key}: {_flat(value)}" for key, value in detail.items())
    if isinstance(detail, list):
        return " ".join(_flat(item) for item in detail)
    return str(detail)


def _start_run(suite: str, *, node: Node, partner: Node | None, user, transport) -> BenchmarkRun:
    if suite == Suite.PAIRWISE:
        targets = TargetSpec(nodes=(node.hostname, partner.hostname))
        return benchmarks.start_run(suite=suite, targets=targets, transport=transport, requested_by=user)
    extra = {"burn_load": BurnLoad.DCGM_R3} if suite == Suite.BURN_IN else {}
    targets = TargetSpec(nodes=(node.hostname,))
    return benchmarks.start_run(suite=suite, targets=targets, transport=transport, requested_by=user, **extra)


def run_verdict(run: BenchmarkRun, node: Node) -> tuple[bool, str]:
    """Whether the run passed the node, and in words why or why not."""
    name = run.get_suite_display().split(":")[0]
    if run.status != RunStatus.SUCCEEDED:
        return False, f"{name} ended {run.status}: {run.summary}"
    if run.suite == Suite.PAIRWISE:
        suspect = run.suspects.filter(node=node).exclude(verdict=Verdict.PASS).first()
        if suspect is not None:
            return False, f"{name}: {node.hostname} suspected ({suspect.cause or suspect.verdict})"
        if node.hostname in (run.parameters.get("unresolved") or []):
            return False, f"{name}: {node.hostname} could not be judged"
        return True, f"{name}: no slow link or link errors on {node.hostname}"
    figures = list(run.measurements.filter(launcher=node.hostname, reference__isnull=False))
    bad = [figure for figure in figures if figure.verdict in (Verdict.FAIL, Verdict.COULD_NOT_RUN)]
    if not figures:
        return False, f"{name}: no judged figure for {node.hostname}"
    if bad:
        return False, f"{name}: " + ", ".join(f"{figure.case} {figure.verdict}" for figure in bad[:4])
    return True, f"{name}: {counted(len(figures), 'figure')} within reference"


def run_finished(*, run: BenchmarkRun) -> RepairGate | None:
    """A benchmark run ended: the running gate that waits on it passes once all its runs passed the node (the node
    goes back into service), or fails at its first failed run (the repair goes back to in repair)."""
    gate = RepairGate.objects.filter(runs=run, state=GateState.RUNNING).select_related("repair__node").first()
    if gate is None:
        return None
    node = gate.repair.node
    runs = list(gate.runs.order_by("created", "pk"))
    verdicts = [
        (run, *run_verdict(run, node)) for run in runs if run.status not in (RunStatus.QUEUED, RunStatus.RUNNING)
    ]
    failed = [(run, why) for run, passed, why in verdicts if not passed]
    if not failed and len(verdicts) < len(runs):
        return gate  # the others are still running
    with transaction.atomic():
        gate = RepairGate.objects.select_for_update().get(pk=gate.pk)
        if gate.state != GateState.RUNNING:
            return gate  # another run's end settled it
        repair = Repair.objects.select_for_update().get(pk=gate.repair_id)
        gate.finished_at = timezone.now()
        if failed:
            gate.state = GateState.FAILED
            gate.summary = "; ".join(why for _, why in failed)[:500]
            for other in runs:  # what is left of a failed gate is not needed
                if other.status in (RunStatus.QUEUED, RunStatus.RUNNING):
                    with contextlib.suppress(benchmarks.RunFinished):  # it ended meanwhile: nothing to cancel
                        benchmarks.cancel_run(run=other)
            repair.state = RepairState.IN_REPAIR
            _note(repair, None, f"Validation failed, back to repair: {gate.summary}")
            gate.save()
            repair.save()
            return gate
        gate.state = GateState.PASSED
        gate.summary = "; ".join(why for _, _, why in verdicts)[:500]
        gate.save()
        health.clear_validated(
            node=node,
            kinds=validated_kinds(repair, gate.kind),
            validation={
                "repair": str(repair.public_id),
                "gate": gate.kind,
                "benchmark_runs": [str(r.public_id) for r in runs],
            },
            reason=f"Repair validated ({gate.get_kind_display().split(':')[0]} gate): {gate.summary}"[:300],
        )
        _note(repair, None, f"Validation passed: {gate.summary}")
        repair.save()
        passed = (repair, gate)
        transaction.on_commit(lambda: repair_validated.send(sender=Repair, repair=passed[0], gate=passed[1]))
    try:
        return_to_service(repair=repair)
    except RepairRefused as refused:
        with transaction.atomic():
            repair = Repair.objects.select_for_update().get(pk=repair.pk)
            _note(repair, None, f"Validation passed but the node was not resumed: {_flat(refused.detail)}")
            repair.save()
    return gate


def validated_kinds(repair: Repair, gate_kind: str) -> list[str]:
    """The open event kinds on the repair's node that its passed gate clears: the repair's own, and those of the
    faults the gate checks (its rules, and the BMC records of them); the whole acceptance checks them all. Other
    kinds stay open: a GPU gate says nothing of a cable."""
    gates = (GateKind.GPU, GateKind.LINK) if gate_kind == GateKind.ACCEPTANCE else (gate_kind,)
    patterns = [
        pattern for gate, rule in GATE_RULES.items() if gate in gates for pattern in rule.chosen_by + rule.also_clears
    ]
    open_kinds = set(health.open_events(node=repair.node).values_list("kind", flat=True))
    covered = {kind for kind in open_kinds if any(fnmatchcase(kind, pattern) for pattern in patterns)}
    return sorted(covered | set(repair.events.values_list("kind", flat=True)))


def passed_gate(repair: Repair) -> RepairGate | None:
    """The repair's latest gate when it passed (a later failure or a running one means none)."""
    latest = repair.gates.order_by("-started_at", "-pk").first()
    return latest if latest is not None and latest.state == GateState.PASSED else None


def return_to_service(*, repair: Repair, user=None) -> Repair:
    """Back into service through the scheduler: undrained in the inventory and the scheduler-action undrain job
    (Slurm resume read back, or uncordon) started, in one transaction. Only after a passed gate. The repair is
    `returning` until the job ends (resume_finished): returned when the scheduler resumed the node, else back to
    `validating`, drained again."""
    if not repair.is_active:
        raise RepairRefused("repair", f"The repair is {repair.get_state_display().lower()} already.")
    if passed_gate(repair) is None:
        raise RepairRefused("gate", "No passed validation: the node goes back into service only after one.")
    try:
        with transaction.atomic():
            repair = Repair.objects.select_for_update().select_related("node").get(pk=repair.pk)
            if repair.state == RepairState.RETURNING:  # read under the lock: two clicks start one resume
                raise RepairRefused(
                    "repair", f"The scheduler is resuming the node already (job {repair.resume_job_id})."
                )
            node = repair.node
            repair.drain_before_return = (
                {
                    "since": node.drained_at.isoformat(),
                    "reason": node.drain_reason,
                    "until": node.drained_until.isoformat() if node.drained_until else None,
                }
                if node.is_drained
                else {}
            )
            undrain_nodes(nodes=[node])
            job = start_scheduler_action(node=node, requested_by=user)
            repair.state, repair.resume_job_id = RepairState.RETURNING, job.public_id
            _note(repair, user, f"Returning to service: scheduler job {job.public_id} resumes {node.hostname}.")
            repair.save()
    except RepairRefused:
        raise
    except (serializers.ValidationError, NodeChangeRefused) as error:
        raise RepairRefused("resume", f"{repair.node.hostname} was not resumed, nothing changed: {error}") from None
    return repair


def scheduler_error(job: Job) -> str:
    """What the scheduler-action job's failed cells said (a refused resume, the node read back still drained, the
    controller not answering), else the job's summary."""
    failed = JobStep.objects.filter(job=job, status__in=(StepStatus.FAILED, StepStatus.ERROR)).order_by("position")
    said = "; ".join(f"{step.step}: {step.summary}" for step in failed if step.summary)
    return said or job.summary or str(job.status)


def resume_finished(*, job: Job) -> Repair | None:
    """The scheduler-action job of a return ended. Succeeded: the repair is returned. Otherwise the scheduler still
    holds the node: the repair stays active with its passed gate (`validating`), the inventory's drain is put back, a
    note names the scheduler's error, and an operator returns it again."""
    if job.status in JOB_ACTIVE:
        return None
    with transaction.atomic():
        repair = Repair.objects.select_for_update().filter(resume_job_id=job.public_id).first()
        if repair is None or repair.state != RepairState.RETURNING:
            return repair  # not a return's job, or settled already (the signal and the periodic pass both call this)
        node = repair.node
        if job.status == JobStatus.SUCCEEDED:
            repair.state, repair.closed_at, repair.closed_by = RepairState.RETURNED, timezone.now(), job.requested_by
            _note(repair, None, f"Returned to service: the scheduler resumed {node.hostname} (job {job.public_id}).")
            repair.save()
            returned = repair
            transaction.on_commit(lambda: repair_returned.send(sender=Repair, repair=returned))
            return repair
        before = repair.drain_before_return or {}
        drain_nodes(
            nodes=[node],
            reason=before.get("reason") or f"rackpilot repair: the scheduler did not resume {node.hostname}",
            since=datetime.fromisoformat(before["since"]) if before.get("since") else timezone.now(),
            until=datetime.fromisoformat(before["until"]) if before.get("until") else None,
        )  # audited: the inventory follows the scheduler, which still holds the node drained
        repair.state, repair.resume_job_id = RepairState.VALIDATING, None
        _note(
            repair,
            None,
            f"The scheduler did not resume {node.hostname} (job {job.public_id} {job.status}): {scheduler_error(job)}. "
            "Drained again; return it to service once the scheduler can take it.",
        )
        repair.save()
    return repair


def settle_returns() -> list[Repair]:
    """The safety net for a return whose job's end was not heard (its hook failed, the worker was lost): the periodic
    pass settles each `returning` repair whose job is over."""
    returning = Repair.objects.filter(state=RepairState.RETURNING, resume_job_id__isnull=False)
    jobs = Job.objects.filter(public_id__in=returning.values("resume_job_id")).exclude(status__in=JOB_ACTIVE)
    return [repair for job in jobs if (repair := resume_finished(job=job)) is not None]


def close_repair(*, repair: Repair, user, note: str) -> Repair:
    """An operator ends a repair without a return (the node retired, sent back to the vendor): it stays drained."""
    if not (note or "").strip():
        raise RepairRefused("note", "Say why the repair is closed without a return.")
    if not repair.is_active:
        raise RepairRefused("repair", f"The repair is {repair.get_state_display().lower()} already.")
    if repair.gates.filter(state=GateState.RUNNING).exists():
        raise RepairRefused("repair", "A validation is running: wait for it to end.")
    if repair.state == RepairState.RETURNING:
        raise RepairRefused("repair", f"The scheduler is resuming the node (job {repair.resume_job_id}): wait for it.")
    repair.state, repair.closed_at = RepairState.CLOSED, timezone.now()
    repair.closed_by = user if getattr(user, "pk", None) else None
    _note(repair, user, f"Closed without a return: {note}")
    repair.save()
    return repair


def undrain_refusal(node: Node) -> str:
    """Why the node may not go back into service by hand ("" when it may): an active repair without a passed gate."""
    repair = active_repair(node)
    if repair is None or passed_gate(repair) is not None:
        return ""
    return (
        f"{node.hostname} is in repair ({repair.get_state_display().lower()}): it returns through its repair's "
        "validation, not by hand."
    )
