"""What a deployment's runs found and the state they leave it in: the deploy kind writes through these while its job
runs and when it ends (apps.deployments.kinds), and services and pages read the outcomes. Nothing here imports the
kind or the services, so both can stand on it."""

from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from apps.core.audit import audit_context
from apps.core.choices import ChangeSource
from apps.deployments import cluster
from apps.deployments.choices import (
    OUTCOME_RANK,
    VERIFIED_OUTCOMES,
    ApprovalScope,
    DeploymentState,
    Outcome,
    SuggestionState,
)
from apps.deployments.context import node_contexts
from apps.deployments.models import Approval, Deployment, DeploymentRun, Suggestion, Verdict
from apps.deployments.steps import PLAN
from apps.deployments.steps.base import Finding
from apps.inventory.choices import NodeStatus
from apps.inventory.models import Node
from apps.jobs.choices import JOB_ACTIVE, JobStatus, StepStatus
from apps.jobs.models import Job


@dataclass
class Cell:
    """What a deploy cell found: its status, one-line summary, verdicts and suggestions (record_cell stores them)."""

    status: str = StepStatus.SUCCEEDED
    summary: str = ""
    findings: list[Finding] = field(default_factory=list)
    suggestions: list[dict] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)
    rebooted: bool = False  # the node was rebooted between the fix and the verify (Step.reboot_after_fix)
    record: bool = True  # False when nothing was judged (skipped by phase, resume or not applicable)


def run_of(job: Job) -> tuple[Deployment, DeploymentRun]:
    run = DeploymentRun.objects.select_related("deployment").get(job=job)
    return run.deployment, run


def cell_outcomes(deployment: Deployment) -> dict[tuple[str, str], tuple[str, int]]:
    """(hostname, step) -> (worst outcome, run number) of the latest run that judged that cell."""
    latest: dict[tuple[str, str], int] = {}
    rows = Verdict.objects.filter(deployment=deployment).values_list("hostname", "step", "run__number", "outcome")
    outcomes: dict[tuple[str, str, int], str] = {}
    for hostname, step, number, outcome in rows:
        key = (hostname, step)
        latest[key] = max(latest.get(key, 0), number)
        previous = outcomes.get((hostname, step, number))
        if previous is None or OUTCOME_RANK[Outcome(outcome)] > OUTCOME_RANK[Outcome(previous)]:
            outcomes[(hostname, step, number)] = outcome
    return {key: (outcomes[(*key, number)], number) for key, number in latest.items()}


def verified_cells(deployment: Deployment, *, before: DeploymentRun) -> dict[tuple[str, str], int]:
    """Cells an earlier run verified (pass or warn): a resume skips them."""
    return {
        key: number
        for key, (outcome, number) in cell_outcomes(deployment).items()
        if number < before.number and outcome in VERIFIED_OUTCOMES
    }


def approved_cells(deployment: Deployment) -> set[tuple[str, str]]:
    cells = set()
    for step, hostnames in Approval.objects.filter(
        deployment=deployment, scope__in=[ApprovalScope.STEP, ApprovalScope.FIX]
    ).values_list("step", "hostnames"):
        cells.update((hostname, step) for hostname in hostnames)
    return cells


def is_verified(node, outcomes: dict) -> bool:
    """Every plan step that applies to the node has a verified latest outcome."""
    return all(
        outcomes.get((node.hostname, step.name), (None, 0))[0] in VERIFIED_OUTCOMES
        for step in PLAN
        if step.applies_to(node)
    )


def nodes_with_work(deployment: Deployment) -> list[int]:
    """Nodes with a plan step not yet verified (or never judged)."""
    outcomes = cell_outcomes(deployment)
    contexts = node_contexts(deployment, with_topology=False, with_files=False)
    return [node.node_id for node in contexts.values() if not is_verified(node, outcomes)]


def record_cell(*, run: DeploymentRun, node_id: int | None, hostname: str, step: str, cell: Cell) -> list[str]:
    """Store one judged cell's verdicts and suggestions as soon as it is over (the page can act on them while the
    run goes on); suggestions of earlier runs for the same cell are settled by it. Returns the suggestions' ids."""
    deployment = run.deployment
    verdicts = [
        Verdict(
            deployment=deployment,
            run=run,
            node_id=node_id,
            hostname=hostname,
            step=step,
            check_name=finding.check[:40],
            subject=finding.subject[:64],
            outcome=finding.outcome,
            value=finding.value[:120],
            criterion=finding.criterion[:300],
            threshold=finding.threshold,
            reference=finding.reference,
            reference_label=finding.reference_label[:80],
            unit=finding.unit[:16],
            attempts=finding.attempts,
            evidence=finding.evidence[:8000],
        )
        for finding in cell.findings
    ]
    suggestions = [
        Suggestion(
            deployment=deployment,
            run=run,
            node_id=node_id,
            **{key: value for key, value in item.items() if key not in ("disruptive", "id")},
        )
        for item in cell.suggestions
    ]
    with transaction.atomic():
        Suggestion.objects.filter(
            deployment=deployment,
            hostname=hostname,
            step=step,
            state__in=[SuggestionState.OPEN, SuggestionState.APPROVED],
        ).exclude(run=run).update(state=SuggestionState.RESOLVED, updated=timezone.now())
        Verdict.objects.bulk_create(verdicts)
        Suggestion.objects.bulk_create(suggestions)
    return [str(suggestion.public_id) for suggestion in suggestions]


def record_shard(*, job: Job, hostnames: set[str]) -> None:
    """After a shard: nodes whose every step is verified become ready in the inventory."""
    deployment, _ = run_of(job)
    _mark_ready_nodes(deployment, hostnames, job)


def _mark_ready_nodes(deployment: Deployment, hostnames: set[str], job: Job) -> None:
    outcomes = cell_outcomes(deployment)
    node_ids = Node.objects.filter(hostname__in=hostnames).values_list("pk", flat=True)
    contexts = node_contexts(deployment, node_ids, with_topology=False, with_files=False)
    ready = [node.node_id for node in contexts.values() if is_verified(node, outcomes)]
    with audit_context(source=ChangeSource.JOB, user=job.requested_by, job=job):
        for node in Node.objects.filter(pk__in=ready).exclude(status=NodeStatus.READY):
            node.status = NodeStatus.READY
            node.save()


def settle_state(deployment: Deployment) -> Deployment:
    """Once a run's job is over: passed, needs attention or canceled, from the verdicts so far. The deploy kind's
    job_finished calls it (the reaper's ending of a job included); settle_finished_runs() is the safety net. When
    every node is verified and the plan has cluster acceptance, the deployment stays running while that phase is
    scheduled and runs (its task settles it again at the end)."""
    if deployment.state != DeploymentState.RUNNING:
        return deployment  # drafts, approved plans and finished runs do not change by themselves
    run = deployment.latest_run
    if run is None or run.job.status in JOB_ACTIVE:
        return deployment
    if run.job.status == JobStatus.CANCELED:
        state = DeploymentState.CANCELED
    elif nodes_with_work(deployment):
        state = DeploymentState.FAILED
    else:
        # Every node verified: phase 5, cluster acceptance, decides (when the plan has it).
        phase = cluster.phase_state(deployment, run)
        if phase == cluster.TO_SCHEDULE:
            cluster.schedule(deployment, run)
            return deployment
        if phase == cluster.PENDING:
            return deployment
        state = DeploymentState.PASSED if phase in (cluster.OFF, *VERIFIED_OUTCOMES) else DeploymentState.FAILED
    Deployment.objects.filter(pk=deployment.pk, state=DeploymentState.RUNNING).update(
        state=state, updated=timezone.now()
    )
    deployment.state = state
    return deployment


def settle_finished_runs() -> int:
    """The safety net (Celery beat): settle every deployment still marked running whose run's job is over, in case
    the job's end could not (its job_finished failed). Returns how many changed."""
    stuck = Deployment.objects.filter(state=DeploymentState.RUNNING).exclude(runs__job__status__in=JOB_ACTIVE)
    return sum(settle_state(deployment).state != DeploymentState.RUNNING for deployment in stuck)
