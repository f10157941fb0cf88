"""Deployments: create and edit the plan, dry-run it, approve it, run and resume it, decide suggestions, and read
what the runs found. Views and the API call these; every write a user asks for is checked here once. What a run
writes while it goes and when it ends is in apps.deployments.recording (the deploy kind's side)."""

import re
from collections import Counter

from django.db import transaction
from django.db.models import Max
from django.utils import timezone
from rest_framework import serializers

from apps.accounts.choices import Role
from apps.core import audit
from apps.core.choices import AuditAction
from apps.deployments import artefacts, cluster, criteria, options
from apps.deployments.choices import (
    VERIFIED_OUTCOMES,
    ApprovalScope,
    DeploymentState,
    Outcome,
    SuggestionState,
    WizardStage,
)
from apps.deployments.context import (
    StoredPlanInvalid,
    artefact_nodes,
    artefact_problems,
    load_nodes,
    node_contexts,
    render_artefacts,
)
from apps.deployments.kinds.deploy import KIND, Deploy
from apps.deployments.kinds.reboot import reboot_after_fix_commands
from apps.deployments.models import Approval, Deployment, DeploymentRun, Suggestion, Verdict
from apps.deployments.recording import cell_outcomes, nodes_with_work
from apps.deployments.steps import PLAN, STEPS
from apps.inventory.models import Gpu, GpuSku, Node
from apps.jobs import services as job_services
from apps.jobs.choices import JOB_ACTIVE

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class DeploymentError(serializers.ValidationError):
    """A request the deployment's state or the caller's input does not allow; the detail names the field."""


def _refuse(field: str, message: str):
    raise DeploymentError({field: [message]})


# --- the plan -----------------------------------------------------------------------------------------------------


def _primary_sku(nodes: list[Node]) -> GpuSku | None:
    """The SKU most of the nodes' GPUs are: its criteria are the deployment's."""
    counted = Counter(Gpu.objects.filter(node__in=nodes).values_list("sku", flat=True))
    return GpuSku.objects.get(pk=counted.most_common(1)[0][0]) if counted else None


def options_errors(nodes: list[Node] | None, base: dict, edits) -> tuple[dict[str, list[str]], dict]:
    """The options (base with the edits merged) and what is wrong with them, by path: the edits' own rules and what
    the generated files need, side by side (a relative mount beside an MTU of 99999); when both pass and the nodes
    are known (None: their names were refused), the files as rendered for those nodes."""
    if not isinstance(edits, dict):
        return {key: [message] for key, message in options.errors(edits).items()}, base
    merged = options.merged(base, edits)
    problems = options.errors(edits, merged_options=merged)
    for path, message in artefacts.options_errors(merged).items():
        problems.setdefault(f"options.{path}", message)  # the first rule to speak for a path is enough
    if not problems and nodes is not None:
        try:
            artefacts.render_all(merged, artefact_nodes(load_nodes([n.pk for n in nodes])), deployment_name="check")
        except artefacts.ArtefactError as error:
            problems.update(artefact_problems(error))
    return {key: [message] for key, message in problems.items()}, merged


def _criteria_errors(edits) -> dict[str, list[str]]:
    return {key: [message] for key, message in criteria.errors(edits or {}).items()}


def _nodes(targets: job_services.TargetSpec, errors: dict) -> list[Node] | None:
    """The nodes the targets name; None, their errors added to `errors`, when a name matches nothing."""
    try:
        return job_services.resolve_targets(targets)
    except serializers.ValidationError as error:
        errors |= error.detail
        return None


def _judge_new(*, name, targets, option_edits, criteria_edits, transport) -> tuple[dict, list[Node] | None, dict]:
    """(errors, nodes, merged options) of a new plan; a part given as None was refused by the door: not judged."""
    errors: dict = {}
    if name is not None and not NAME.fullmatch(name):
        errors["name"] = ["Letters, digits, . _ - (up to 64), starting with a letter or digit."]
    elif name is not None and Deployment.objects.filter(name=name).exists():
        errors["name"] = [f"A deployment named {name!r} already exists."]
    if transport and transport not in Deploy.transports:
        errors["transport"] = [f"Deployments run over {', '.join(Deploy.transports)}, not {transport!r}."]
    nodes = _nodes(targets, errors) if targets is not None else None
    # Without the nodes (refused), the options are still judged on their own, against the plan's defaults.
    base = options.defaults(nodes or [])
    found, merged = options_errors(nodes, base, option_edits if option_edits is not None else {})
    errors |= found | _criteria_errors(criteria_edits)
    return errors, nodes, merged


def creation_errors(*, name=None, targets=None, option_edits=None, criteria_edits=None, transport=None) -> dict:
    """What create_deployment would refuse of the parts given (None: refused by the door's shape, not judged), saving
    nothing: a door that checks shapes first reports these beside its own, every bad field at once."""
    return _judge_new(
        name=name, targets=targets, option_edits=option_edits, criteria_edits=criteria_edits, transport=transport
    )[0]


def create_deployment(
    *,
    name: str,
    targets: job_services.TargetSpec,
    user,
    option_edits: dict | None = None,
    criteria_edits: dict | None = None,
    description: str = "",
    transport: str = "",
) -> Deployment:
    """A draft plan for the targets with options pre-filled from the inventory; edits are checked (400 naming every
    bad field at once)."""
    errors, nodes, merged = _judge_new(
        name=name or "", targets=targets, option_edits=option_edits, criteria_edits=criteria_edits, transport=transport
    )
    if errors:
        raise DeploymentError(errors)
    snapshot = criteria.resolve(_primary_sku(nodes))
    with transaction.atomic():
        deployment = Deployment.objects.create(
            name=name,
            description=description,
            target_spec=targets.as_json(),
            options=merged,
            criteria=criteria.merged(snapshot, criteria_edits or {}),
            transport=transport,
            created_by=user if getattr(user, "is_authenticated", False) else None,
            stage=WizardStage.VERSIONS,
        )
        deployment.nodes.set(nodes)
    return deployment


def _require_draft(deployment: Deployment) -> None:
    if not deployment.is_draft:
        _refuse("state", f"The plan is {deployment.get_state_display().lower()}; only a draft can be changed.")


def _judge_update(*, deployment, targets, option_edits, criteria_edits, stage) -> tuple[dict, list[Node] | None, dict]:
    """(errors, nodes, merged options) of a change to a draft; None: a part not changed (or refused by the door)."""
    errors: dict = {}
    if targets is not None:
        nodes = _nodes(targets, errors)
        base = options.merged(options.defaults(nodes or []), {})  # other nodes: options re-derived where not edited
    else:
        nodes, base = list(deployment.nodes.all()), deployment.options
    found, merged = options_errors(nodes, base, option_edits if option_edits is not None else {})
    errors |= found | _criteria_errors(criteria_edits)
    if stage is not None and stage not in WizardStage.values:
        errors["stage"] = [f"One of {', '.join(WizardStage.values)}."]
    return errors, nodes, merged


def update_errors(*, deployment: Deployment, targets=None, option_edits=None, criteria_edits=None, stage=None) -> dict:
    """What update_deployment would refuse of the parts given, saving nothing (as creation_errors)."""
    if not deployment.is_draft:
        return {"state": [f"The plan is {deployment.get_state_display().lower()}; only a draft can be changed."]}
    return _judge_update(
        deployment=deployment, targets=targets, option_edits=option_edits, criteria_edits=criteria_edits, stage=stage
    )[0]


def update_deployment(
    *,
    deployment: Deployment,
    targets: job_services.TargetSpec | None = None,
    option_edits: dict | None = None,
    criteria_edits: dict | None = None,
    stage: str | None = None,
    description: str | None = None,
) -> Deployment:
    """Change a draft: other nodes (options re-derived where not edited), option and criteria edits, wizard stage."""
    _require_draft(deployment)
    errors, nodes, merged = _judge_update(
        deployment=deployment, targets=targets, option_edits=option_edits, criteria_edits=criteria_edits, stage=stage
    )
    if errors:
        raise DeploymentError(errors)
    with transaction.atomic():
        deployment.options = merged
        deployment.criteria = criteria.merged(deployment.criteria, criteria_edits or {})
        if targets is not None:
            deployment.target_spec = targets.as_json()
            deployment.nodes.set(nodes)
        if stage is not None:
            deployment.stage = stage
        if description is not None:
            deployment.description = description
        deployment.save()
    return deployment


def dry_run(deployment: Deployment) -> list[dict]:
    """Per node, per step: the exact commands check/verify read and apply may run (nothing runs)."""
    plan = []
    for hostname, node in node_contexts(deployment, with_topology=False).items():
        steps = []
        for step in PLAN:
            if not step.applies_to(node):
                continue
            steps.append(
                {
                    "step": step.name,
                    "label": step.label,
                    "phase": step.phase,
                    "disruptive": step.disruptive,
                    "reads": [call.text() for call in step.reads(node)],
                    "applies": _applies(step, node),
                }
            )
        plan.append({"hostname": hostname, "steps": steps})
    return plan


def _applies(step, node) -> list[str]:
    """What the step's apply may run on the node, its reboot included (approving the step approves the reboot)."""
    applies = [call.display() for call in step.fixes(node, None)]
    return applies + reboot_after_fix_commands() if applies and step.reboot_after_fix else applies


def disruptive_commands(deployment: Deployment, plan: list[dict] | None = None) -> dict[str, dict[str, list[str]]]:
    """step -> hostname -> the commands its apply may run there, for the disruptive steps (what approval shows)."""
    result: dict[str, dict[str, list[str]]] = {}
    for node in plan or dry_run(deployment):
        for step in node["steps"]:
            if step["disruptive"] and step["applies"]:
                result.setdefault(step["step"], {})[node["hostname"]] = step["applies"]
    return result


def plan_artefacts(deployment: Deployment, *, only: str | None = None) -> list:
    return render_artefacts(deployment, only=only)


# --- approval and runs -----------------------------------------------------------------------------------------


def _require_operator(user) -> None:
    if not getattr(user, "is_authenticated", False) or not user.has_role(Role.OPERATOR):
        raise DeploymentError({"approved_by": ["Only an operator or an admin may approve."]})


def approve(*, deployment: Deployment, user, steps: list[str] | None = None) -> Deployment:
    """Sign off the plan, and (optionally) its disruptive steps on every node where they may run, with exactly the
    nodes and commands shown. Nothing runs yet."""
    _require_operator(user)
    _require_draft(deployment)
    steps = list(steps or [])
    try:
        commands = disruptive_commands(deployment)
    except StoredPlanInvalid as error:  # what would be approved cannot be shown: nothing is signed
        raise DeploymentError({path: [message] for path, message in error.errors.items()}) from error
    unknown = [name for name in steps if name not in STEPS or not STEPS[name].disruptive]
    if unknown:
        _refuse("steps", f"Not disruptive steps of the plan: {', '.join(unknown)}.")
    with transaction.atomic():
        Approval.objects.create(
            deployment=deployment,
            scope=ApprovalScope.PLAN,
            approved_by=user,
            approved_by_name=user.username,
            hostnames=list(deployment.nodes.values_list("hostname", flat=True)),
        )
        for name in steps:
            shown = commands.get(name, {})
            Approval.objects.create(
                deployment=deployment,
                scope=ApprovalScope.STEP,
                step=name,
                hostnames=sorted(shown),
                commands=shown,
                approved_by=user,
                approved_by_name=user.username,
            )
        deployment.state = DeploymentState.APPROVED
        deployment.stage = WizardStage.RUN
        deployment.approved_by, deployment.approved_at = user, timezone.now()
        audit.save_as(
            deployment,
            AuditAction.APPROVE,
            object_repr=f"plan of deployment {deployment.name}",
            also={"disruptive steps": [None, ", ".join(steps) or "none"]},
            user=user,
        )
    return deployment


def start(*, deployment: Deployment, user, check_only: bool = False) -> DeploymentRun:
    """The first run: every node of the plan (check_only: read and judge, apply nothing)."""
    _require_operator(user)
    if deployment.state == DeploymentState.DRAFT:
        _refuse("state", "Approve the plan before starting it.")
    if deployment.runs.exists():
        _refuse("state", "This deployment has started already; resume it instead.")
    node_ids = list(deployment.nodes.values_list("pk", flat=True))
    return _launch(deployment, user, node_ids=node_ids, resume=False, check_only=check_only)


def resume(*, deployment: Deployment, user) -> DeploymentRun:
    """Another run over the nodes that still have unverified steps; verified steps are skipped."""
    _require_operator(user)
    if not deployment.runs.exists():
        _refuse("state", "Start the deployment before resuming it.")
    pending = nodes_with_work(deployment)
    if not pending:
        again = " (to test the nodes together, run cluster acceptance again)" if cluster.enabled(deployment) else ""
        _refuse("state", f"Every step is verified on every node: nothing to resume{again}.")
    # A remediation stays one: its resumes apply the same step's fixes only.
    apply_only = deployment.latest_run.job.parameters.get("apply_only") or []
    return _launch(deployment, user, node_ids=pending, resume=True, apply_only=apply_only)


def remediate(*, hostname: str, step: str, user, transport: str, reason: str = "") -> DeploymentRun:
    """Put one node right by one step of the plan, the way a deployment does: a deployment over that node whose plan
    (and the step, when disruptive, with exactly the commands its dry run shows) the user approves, started at once.
    Its run applies that step's fixes only, and reads and judges the others."""
    _require_operator(user)
    if step not in STEPS:
        _refuse("step", f"{step!r} is no step of the plan.")
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    name = f"fix-{step}-{hostname[:40]}-{stamp}"
    with transaction.atomic():
        deployment = create_deployment(
            name=name,
            targets=job_services.TargetSpec(nodes=(hostname,)),
            user=user,
            description=reason,
            transport=transport,
        )
        approve(deployment=deployment, user=user, steps=[step] if STEPS[step].disruptive else [])
        node_ids = list(deployment.nodes.values_list("pk", flat=True))
        return _launch(deployment, user, node_ids=node_ids, resume=False, apply_only=[step])


def _launch(
    deployment: Deployment,
    user,
    *,
    node_ids: list[int],
    resume: bool,
    check_only: bool = False,
    apply_only: list[str] | None = None,
) -> DeploymentRun:
    with transaction.atomic():
        deployment = Deployment.objects.select_for_update().get(pk=deployment.pk)
        active = deployment.runs.filter(job__status__in=JOB_ACTIVE).exists()
        if active:
            _refuse("state", "A run of this deployment is in progress.")
        number = (deployment.runs.aggregate(last=Max("number"))["last"] or 0) + 1
        hostnames = tuple(Node.objects.filter(pk__in=node_ids).values_list("hostname", flat=True).order_by("hostname"))
        job = job_services.create_job(
            kind=KIND,
            targets=job_services.TargetSpec(nodes=hostnames),
            parameters={
                "deployment": str(deployment.public_id),
                "run": number,
                "check_only": check_only,
                "apply_only": apply_only or [],
            },
            transport=deployment.transport or None,
            requested_by=user,
        )
        run = DeploymentRun.objects.create(
            deployment=deployment, job=job, number=number, resume=resume, started_by=user
        )
        deployment.state = DeploymentState.RUNNING
        deployment.save(update_fields=["state", "updated"])
    return run


def rerun_cluster_acceptance(*, deployment: Deployment, user) -> list:
    """Phase 5 once more over the deployment's nodes (after a cable was replaced, say): a new attempt of its checks,
    queued for the worker; the deployment runs until they have spoken."""
    _require_operator(user)
    with transaction.atomic():
        deployment = Deployment.objects.select_for_update().get(pk=deployment.pk)
        run = deployment.latest_run
        if run is None:
            _refuse("state", "Start the deployment first: cluster acceptance follows the per-node phases.")
        if run.job.status in JOB_ACTIVE:
            _refuse("state", "A run of this deployment is in progress.")
        if not cluster.enabled(deployment):
            _refuse("options.acceptance.cluster", "This plan has no cluster acceptance (it needs two nodes or more).")
        if nodes_with_work(deployment):
            _refuse("state", "Some nodes still have unverified steps: resume the deployment first.")
        if cluster.phase_state(deployment, run) == cluster.PENDING:
            _refuse("state", "Cluster acceptance is already running.")
        checks = cluster.schedule(deployment, run)
        Deployment.objects.filter(pk=deployment.pk).update(state=DeploymentState.RUNNING, updated=timezone.now())
        audit.record(
            AuditAction.START,
            obj=deployment,
            object_repr=f"{deployment.name}: cluster acceptance (attempt {checks[0].attempt})",
            user=user,
        )
    return checks


# --- suggestions ----------------------------------------------------------------------------------------------------


def approve_suggestion(*, suggestion: Suggestion, user) -> Suggestion:
    """Approve the suggested fix: the next resume runs the step's apply on that node (with exactly these commands)."""
    _require_operator(user)
    if suggestion.state != SuggestionState.OPEN:
        _refuse("state", f"This suggestion is {suggestion.get_state_display().lower()}.")
    if not suggestion.remediation_step:
        _refuse("remediation_step", "This suggestion has no fix Rackpilot can run; follow its advice by hand.")
    with transaction.atomic():
        Approval.objects.create(
            deployment=suggestion.deployment,
            scope=ApprovalScope.FIX,
            step=suggestion.remediation_step,
            hostnames=[suggestion.hostname],
            commands={suggestion.hostname: suggestion.fix_commands},
            suggestion=suggestion,
            approved_by=user,
            approved_by_name=user.username,
        )
        suggestion.state, suggestion.decided_by, suggestion.decided_at = SuggestionState.APPROVED, user, timezone.now()
        audit.save_as(
            suggestion,
            AuditAction.APPROVE,
            object_repr=f"fix on {suggestion.hostname}: {suggestion.title}",
            also={"commands": [None, "; ".join(suggestion.fix_commands)]},
            user=user,
        )
    return suggestion


def dismiss_suggestion(*, suggestion: Suggestion, user) -> Suggestion:
    _require_operator(user)
    if suggestion.state not in (SuggestionState.OPEN, SuggestionState.APPROVED):
        _refuse("state", f"This suggestion is {suggestion.get_state_display().lower()}.")
    with transaction.atomic():
        suggestion.state, suggestion.decided_by, suggestion.decided_at = SuggestionState.DISMISSED, user, timezone.now()
        suggestion.save()
        audit.record(
            AuditAction.DISMISS, obj=suggestion, object_repr=f"{suggestion.hostname}: {suggestion.title}", user=user
        )
    return suggestion


# --- reading ----------------------------------------------------------------------------------------------------------


def matrix(deployment: Deployment) -> dict:
    """The node x step matrix over all runs: each cell's latest outcome, counts per phase for the progress bar, and
    how many cells stand at each outcome."""
    outcomes = cell_outcomes(deployment)
    hostnames = list(deployment.nodes.order_by("hostname").values_list("hostname", flat=True))
    phases = {}
    for step in PLAN:
        done = sum(1 for h in hostnames if outcomes.get((h, step.name), (None,))[0] in VERIFIED_OUTCOMES)
        entry = phases.setdefault(step.phase, {"total": 0, "verified": 0})
        entry["total"] += len(hostnames)
        entry["verified"] += done
    return {
        "hostnames": hostnames,
        "steps": [s.name for s in PLAN],
        "outcomes": outcomes,
        "phases": phases,
        "counts": verdict_counts(deployment, outcomes),
    }


def verdict_counts(deployment: Deployment, outcomes: dict | None = None) -> dict[str, int]:
    """How many cells stand at each outcome (their latest run's worst verdict)."""
    counts = {outcome: 0 for outcome in Outcome.values}
    for outcome, _ in (outcomes if outcomes is not None else cell_outcomes(deployment)).values():
        counts[outcome] += 1
    return counts


def latest_verdicts(deployment: Deployment):
    """Every verdict of the latest run that judged each cell (the report's rows)."""
    latest = {key: number for key, (_, number) in cell_outcomes(deployment).items()}
    rows = (
        Verdict.objects.filter(deployment=deployment).select_related("run").order_by("hostname", "step", "check_name")
    )
    return [v for v in rows if latest.get((v.hostname, v.step)) == v.run.number]


def approvals(deployment: Deployment):
    return deployment.approvals.select_related("approved_by").order_by("created")
