"""Tells the simulator which training runs its nodes take part in, from the workloads' TrainingJob rows.

The simulator may not import apps.workloads (same layer), so it defines a hook (apps.simulator.training
.register_run_source) and this app, above both, fills it: a simulated node then answers `tail`/`cat` of a running
job's log path with the log the model gives for now.
"""

from django.conf import settings

from apps.simulator.training import TrainingRun, register_run_source
from apps.workloads.choices import TrainingState
from apps.workloads.models import TrainingJob

SIMULATED_STATES = (TrainingState.RUNNING, TrainingState.INTERRUPTED, TrainingState.FAILED)


def runs_on(hostname: str | None) -> list[TrainingRun]:
    """The runs a host takes part in (None: every run of the cluster, for the scheduler's controller)."""
    jobs = TrainingJob.objects.filter(state__in=SIMULATED_STATES)
    if hostname is not None:
        jobs = jobs.filter(members__node__hostname=hostname)
    jobs = jobs.exclude(started_at=None).exclude(log_path="").prefetch_related("members__node")
    return [training_run(job) for job in jobs]


def training_run(job: TrainingJob) -> TrainingRun:
    members = sorted(job.members.all(), key=lambda member: member.node_rank)
    hosts = tuple(member.node.hostname for member in members)
    if job.placements:  # moved by a recovery: the run began on its first node list (the resumes say the rest)
        hosts = tuple(job.placements[0]["hosts"])
    return TrainingRun(
        name=job.name,
        hosts=hosts,
        ranks_per_node=job.ranks_per_node,
        checkpoint_dir=job.checkpoint_dir or f"/checkpoints/{job.name}",
        checkpoint_interval=job.checkpoint_interval_steps,
        seed=settings.RACKPILOT_SIM_SEED,
        started=job.started_at.timestamp(),
        log_path=job.log_path,
        launcher=job.launcher,
    )


def install() -> None:
    register_run_source(runs_on)
