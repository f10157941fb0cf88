"""Cost policies: define them, dry-run them, approve, apply and revert their actions, and evaluate them on beat's
schedule. Every approve, apply and revert is audited; viewers may do none of it, and only an admin grants a policy
standing approval (a trust decision)."""

import math

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.accounts.choices import Role
from apps.core import audit
from apps.core.choices import AuditAction
from apps.core.text import counted
from apps.costs.choices import ACTION_IN_FORCE, ActionState, ActionTrigger, ApprovalKind, PolicyState
from apps.costs.kinds import power_limit, tiering  # noqa: F401 (register the job kinds)
from apps.costs.models import CostPolicy, PolicyAction
from apps.costs.policies import energy, scaling, spot  # noqa: F401 (register the policy kinds)
from apps.costs.policies import tiering as storage_tiering  # noqa: F401 (registers the storage-tiering kind)
from apps.costs.policies.base import StaleAction, policy_kind, set_proposal_recorder
from apps.jobs.services import TargetSpec, create_job
from apps.monitoring import slo
from apps.monitoring.models import Slo
from apps.monitoring.telemetry import Telemetry, TelemetryError, Window, telemetry


class PolicyError(Exception):
    """Refused: `errors` maps the field at fault to its message (the API answers 400 with it, the page shows it)."""

    def __init__(self, errors: dict[str, str]):
        super().__init__("; ".join(f"{field}: {message}" for field, message in errors.items()))
        self.errors = errors


def _require(user, role: str, field: str = "approved_by") -> None:
    if not getattr(user, "is_authenticated", False) or not user.has_role(role):
        who = "an operator or an admin" if role == Role.OPERATOR else "an admin"
        raise PolicyError({field: f"Only {who} may do this."})


def check_parameters(*, kind: str, parameters: dict, nodes, policy=None) -> dict:
    """The kind's validated parameters for this scope (and the policy's service, where the kind needs one);
    serializers.ValidationError keyed by parameter name."""
    return policy_kind(kind).check(parameters, nodes=nodes, policy=policy)


def _now(now: float | None) -> float:
    return timezone.now().timestamp() if now is None else now


# --- the SLO guard --------------------------------------------------------------------------------------------------


def latency_trouble(*, source: Telemetry, hostnames: list[str], now: float | None = None) -> str:
    """Why a latency SLO on these nodes forbids lowering clocks now: one of its burn-rate alerts fires, or its latest
    step misses the target. "" when every such SLO has headroom."""
    end = _now(now)
    wanted = set(hostnames)
    windows = sorted({w for long, short, _, _ in slo.BURN_ALERTS for w in (long, short)}, key=slo._seconds)
    for row in Slo.objects.filter(objective=slo.Objective.LATENCY_P99).select_related("service"):
        spec = row.spec()
        if not wanted & set(spec.hosts):
            continue
        verdicts = {}
        for name in windows:
            span = float(slo._seconds(name))
            step = max(60.0, span / 60)
            values = [
                1000 * value
                for value in source.p99_latency_seconds(
                    service=spec.service, window=Window(end=end, span=span, step=step, rate_range=step)
                ).values()
            ]
            verdicts[name] = [slo.meets(spec, value) for value in values]
        firing = slo.burn_alerts(spec, verdicts)
        if firing:
            alert = firing[0]
            return f"latency SLO {row.name} burns its budget {alert['burn_rate']:.1f}x ({alert['window']} window)"
        latest = next((v for v in reversed(verdicts[windows[0]]) if v is not None), None)
        if latest is False:
            return f"latency SLO {row.name}: p99 above {spec.target:g} ms now"
    return ""


def _slo_trouble(action: PolicyAction, *, source: Telemetry, now: float | None) -> str:
    """latency_trouble() on the nodes the action's kind guards (power limits: its nodes; scaling in: the service's
    nodes), "" for a kind whose actions do not slow nodes down."""
    kind = policy_kind(action.policy.kind)
    if not kind.guards_latency:
        return ""
    return latency_trouble(source=source, hostnames=kind.guarded_hostnames(action), now=now)


# --- dry run, approval, apply, revert -------------------------------------------------------------------------------


def _source() -> Telemetry:
    try:
        return telemetry()
    except TelemetryError as error:
        raise PolicyError({"telemetry": str(error)}) from None


def dry_run(*, policy: CostPolicy, user=None, now: float | None = None, trigger: str = ActionTrigger.DRY_RUN):
    """What the policy would do now and what it would save, from the telemetry, recorded as a proposal (nothing
    runs). Returns the PolicyAction, or raises PolicyError saying why there is nothing to do."""
    if user is not None:
        _require(user, Role.OPERATOR, "requested_by")
    kind = policy_kind(policy.kind)
    source = _source()
    in_force = set()
    for action in policy.actions.filter(state__in=ACTION_IN_FORCE):
        in_force |= set(action.hostnames)
    try:
        proposal, why_not = kind.propose(policy, source=source, now=_now(now), exclude=in_force)
    except TelemetryError as error:
        raise PolicyError({"telemetry": str(error)}) from None
    if proposal is None:
        raise PolicyError({"policy": f"Nothing to do: {why_not}"[:300]})
    with transaction.atomic():
        for stale in policy.actions.filter(state=ActionState.PROPOSED):
            stale.state = ActionState.DISCARDED
            stale.message = "replaced by a newer dry run"
            stale.save()
        action = PolicyAction.objects.create(
            policy=policy,
            trigger=trigger,
            requested_by=user if getattr(user, "pk", None) else None,
            reason=proposal.reason[:300],
            plan=proposal.plan,
            commands=proposal.commands,
            revert_commands=proposal.revert_commands,
            notes=proposal.notes,
            window_seconds=proposal.window_seconds,
            expected_kwh_per_day=proposal.expected_kwh_per_day,
            price_per_kwh=settings.RACKPILOT_ENERGY_PRICE_PER_KWH,
            currency=settings.RACKPILOT_ENERGY_CURRENCY,
            throughput_factor=proposal.throughput_factor,
        )
    return action


def survey(*, policy: CostPolicy, user):
    """Start the job that looks on the node before a dry run can propose (storage tiering: which files are idle,
    which are open). Read-only on the node; its proposal is recorded when it succeeds. Returns the Job. `user` None
    is the policy's own evaluation."""
    if user is not None:
        _require(user, Role.OPERATOR, "requested_by")
    found = policy_kind(policy.kind).survey(policy)
    if found is None:
        raise PolicyError({"policy": "This kind proposes from the telemetry: dry-run it, there is nothing to survey."})
    hostname, parameters = found
    job = create_job(
        kind=policy_kind(policy.kind).job_kind,
        targets=TargetSpec(nodes=(hostname,)),
        parameters=parameters,
        requested_by=user if getattr(user, "pk", None) else None,
    )
    audit.record(
        AuditAction.START,
        obj=policy,
        object_repr=f"survey {policy.name}: {hostname}"[:200],
        changes={"job": [None, str(job.public_id)]},
        user=user,
        job=job,
    )
    return job


def _record_proposal(policy: CostPolicy) -> tuple[PolicyAction | None, str]:
    try:
        return dry_run(policy=policy), ""
    except PolicyError as error:
        return None, str(error.errors.get("policy", error))


set_proposal_recorder(_record_proposal)


def approve(*, action: PolicyAction, user) -> PolicyAction:
    """An operator signs off exactly the commands the proposal shows. Nothing runs yet."""
    _require(user, Role.OPERATOR)
    with transaction.atomic():
        action = PolicyAction.objects.select_for_update().get(pk=action.pk)
        if action.state != ActionState.PROPOSED:
            raise PolicyError({"state": f"Only a proposal can be approved; this one is {action.get_state_display()}."})
        _approve(action, ApprovalKind.OPERATOR, user)
    return action


def _approve(action: PolicyAction, how: str, user) -> None:
    action.state, action.approval, action.approved_at = ActionState.APPROVED, how, timezone.now()
    action.approved_by = user if getattr(user, "pk", None) else None
    action.approved_by_name = user.get_username() if action.approved_by else ""
    audit.save_as(
        action,
        AuditAction.APPROVE,
        object_repr=f"{action.policy.name}: {action.reason}"[:200],
        also={"approval": [None, ApprovalKind(how).label], "commands": [None, action.commands]},
        user=action.approved_by,
    )


def _start(action: PolicyAction, *, mode: str, user, reason: str = "") -> PolicyAction:
    kind = policy_kind(action.policy.kind)
    if kind.job_kind is None:
        return _enact(action, kind, mode=mode, user=user, reason=reason)
    job = create_job(
        kind=kind.job_kind,
        targets=TargetSpec(nodes=tuple(action.hostnames)),
        parameters=kind.job_parameters(action, mode=mode),
        requested_by=user if getattr(user, "pk", None) else None,
    )
    if mode == "apply":
        action.state, action.apply_job = ActionState.APPLYING, job
    elif mode == "revert":
        action.state, action.revert_job, action.revert_reason = ActionState.REVERTING, job, reason[:300]
    action.save()
    if mode == "enforce":
        return action  # a check; what it re-applies is audited when it does (apps/costs/kinds/power_limit.py)
    audit.record(
        AuditAction.START,
        obj=action,
        object_repr=f"{mode} {action.policy.name}: {', '.join(action.hostnames)}"[:200],
        changes={"job": [None, str(job.public_id)], **({"reason": [None, reason]} if reason else {})},
        user=user if getattr(user, "pk", None) else None,
        job=job,
    )
    return action


def _enact(action: PolicyAction, kind, *, mode: str, user, reason: str) -> PolicyAction:
    """A kind without a job records the change at once (the caller holds the action's row lock)."""
    if mode == "enforce":
        return action  # nothing on the nodes to forget
    try:
        done = kind.enact(action, mode=mode)
    except StaleAction as error:
        raise PolicyError({"state": str(error)}) from None
    now = timezone.now()
    if mode == "apply":
        action.state, action.applied_at = ActionState.APPLIED, now
    else:
        action.state, action.reverted_at, action.revert_reason = ActionState.REVERTED, now, reason[:300]
    action.message = done[:300]
    action.save()
    audit.record(
        AuditAction.START,
        obj=action,
        object_repr=f"{mode} {action.policy.name}: {done}"[:200],
        changes={"state": [None, action.state], **({"reason": [None, reason]} if reason else {})},
        user=user if getattr(user, "pk", None) else None,
    )
    return action


def apply(*, action: PolicyAction, user=None, now: float | None = None) -> PolicyAction:
    """Run an approved action's commands (a job). `user` None is the policy's own evaluation, which needs the
    policy's standing approval. Refused while a latency SLO on its nodes burns."""
    if user is not None:
        _require(user, Role.OPERATOR, "requested_by")
    with transaction.atomic():
        action = PolicyAction.objects.select_for_update().select_related("policy").get(pk=action.pk)
        if action.state == ActionState.PROPOSED and user is None and action.policy.standing_approval:
            _approve(action, ApprovalKind.STANDING, None)
        if action.state == ActionState.PROPOSED:
            raise PolicyError({"approved_by": "Approve the proposal first (or give the policy standing approval)."})
        if action.state != ActionState.APPROVED:
            raise PolicyError(
                {"state": f"Only an approved action can be applied; this one is {action.get_state_display()}."}
            )
        try:
            trouble = _slo_trouble(action, source=_source(), now=now)
        except TelemetryError as error:
            raise PolicyError({"telemetry": f"Cannot judge the SLOs' headroom: {error}"}) from None
        if trouble:
            raise PolicyError({"slo": f"Not while the SLO has no headroom: {trouble}."})
        return _start(action, mode="apply", user=user)


def revert(*, action: PolicyAction, user=None, reason: str = "") -> PolicyAction:
    """Put the defaults back on the action's nodes (a job). Operators, or the policy itself (user None): a revert
    never waits for approval."""
    if user is not None:
        _require(user, Role.OPERATOR, "requested_by")
    with transaction.atomic():
        action = PolicyAction.objects.select_for_update().select_related("policy").get(pk=action.pk)
        if action.state not in (ActionState.APPLIED, ActionState.FAILED):
            raise PolicyError(
                {
                    "state": f"Only an applied (or failed) action can be reverted; this one is "
                    f"{action.get_state_display()}."
                }
            )
        return _start(action, mode="revert", user=user, reason=reason or ("by hand" if user else ""))


def discard(*, action: PolicyAction, user) -> PolicyAction:
    _require(user, Role.OPERATOR, "requested_by")
    if action.state not in (ActionState.PROPOSED, ActionState.APPROVED):
        raise PolicyError({"state": "Only a proposal or an approved action not yet applied can be discarded."})
    action.state, action.message = ActionState.DISCARDED, f"discarded by {user.get_username()}"
    action.save()
    return action


def set_standing_approval(*, policy: CostPolicy, user, standing: bool) -> CostPolicy:
    """Let the policy apply its proposals on its own, or not: an admin's decision."""
    _require(user, Role.ADMIN, "standing_approval")
    policy.standing_approval = standing
    policy.save()
    return policy


# --- the periodic evaluation ---------------------------------------------------------------------------------------


def evaluate(*, policy: CostPolicy, now: float | None = None) -> str:
    """One evaluation: revert what a breach or a rise in load undoes, re-apply what nodes forgot, propose (and with
    standing approval apply) what the load allows. Returns what it decided (also kept on the policy)."""
    end = _now(now)
    kind = policy_kind(policy.kind)
    outcome = []
    try:
        source = telemetry()
        busy = policy.actions.filter(state__in=(ActionState.APPLYING, ActionState.REVERTING)).exists()
        for action in policy.actions.filter(state=ActionState.APPLIED):
            trouble = _slo_trouble(action, source=source, now=end)
            risen = "" if trouble else kind.undo_reason(policy, action, source=source, now=end)
            if trouble or risen:
                reason = f"SLO breach: {trouble}" if trouble else risen
                revert(action=action, reason=reason)
                outcome.append(f"reverting ({reason})")
            elif kind.enforces and kind.job_kind is not None:
                _start(action, mode="enforce", user=None)
                outcome.append(f"checking the limit still holds on {counted(len(action.hostnames), 'node')}")
        if not outcome and not busy and policy.state == PolicyState.ENABLED:
            outcome.append(_propose(policy, now=end, source=source))
    except (TelemetryError, PolicyError) as error:
        outcome.append(str(error))
    text = "; ".join(outcome)[:300] or "nothing to do"
    CostPolicy.objects.filter(pk=policy.pk).update(last_evaluated=timezone.now(), last_outcome=text)
    return text


def _propose(policy: CostPolicy, *, now: float, source: Telemetry) -> str:
    open_action = policy.actions.filter(state__in=(ActionState.PROPOSED, ActionState.APPROVED)).first()
    if open_action is not None and not policy.standing_approval:
        return "a proposal waits for approval"
    try:
        action = open_action or dry_run(policy=policy, now=now, trigger=ActionTrigger.EVALUATION)
    except PolicyError as error:
        why_not = str(error.errors.get("policy", error))
        if policy_kind(policy.kind).survey_due(policy):
            job = survey(policy=policy, user=None)
            return f"{why_not}; surveying (job {job.public_id})"
        return why_not
    trouble = _slo_trouble(action, source=source, now=now)
    if trouble:
        return f"held: {trouble}"
    if not policy.standing_approval:
        return f"proposed: {action.reason}"
    apply(action=action, now=now)
    return f"applying with standing approval: {action.reason}"


def evaluate_all(*, now: float | None = None) -> int:
    """Beat: evaluate every enabled policy, and every policy with an action in force (a paused policy still reverts
    on a breach)."""
    policies = CostPolicy.objects.filter(state=PolicyState.ENABLED) | CostPolicy.objects.filter(
        actions__state=ActionState.APPLIED
    )
    count = 0
    for policy in policies.distinct():
        evaluate(policy=policy, now=now)
        count += 1
    return count


def saving_money(kwh: float) -> float:
    return kwh * settings.RACKPILOT_ENERGY_PRICE_PER_KWH if math.isfinite(kwh) else 0.0
