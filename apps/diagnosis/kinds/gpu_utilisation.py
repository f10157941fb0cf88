"""The `gpu-utilisation` job kind: runbook 2's checks, one job per phase, each phase started by the one before.

- `sample` on every node of the training job: the utilisation series (apps/diagnosis/utilisation.py reads it);
  when all are in, the fleet comparison (who the others wait for, dips on every GPU), then the branch: a reason
  holding a lagging GPU's clock, or dips everywhere, concludes; a node behind with nothing holding its clocks goes to
- `scheduler` (Kubernetes and Slurm jobs) on the scheduler's controller: `kubectl get pods -A -o wide` or
  `scontrol show job -d`, the workloads on the nodes behind; a second trainer there concludes with the scheduler
  fix: the deployment's artefacts regenerated for the job's nodes (Kubernetes), or the job requeued exclusive and
  its batch option (Slurm);
- `fix`: the power limits put back (the only cause with commands; the others are done by hand);
- `verify`: the series again on every node: resolved when it shows no fault.
"""

from django.utils import timezone
from rest_framework import serializers

from apps.deployments import artefacts
from apps.deployments.context import artefact_nodes, load_nodes
from apps.deployments.models import Deployment
from apps.deployments.node_operations import scheduler_controller
from apps.diagnosis import recording, utilisation
from apps.diagnosis.choices import Cause, EvidenceVerdict, IncidentState, RemediationState
from apps.diagnosis.kinds.nccl_timeout import NcclTimeoutRunbook, RunbookParameters, _stderr, _text, after_fix
from apps.diagnosis.models import Incident, Remediation
from apps.diagnosis.phases import UTILISATION_KIND, Phase, start_phase
from apps.inventory.models import Node
from apps.jobs.choices import EventLevel, JobStatus
from apps.jobs.events import emit
from apps.jobs.kinds import StepSpec, register_kind
from apps.nodeexec.base import CommandResult, NodeTarget
from apps.workloads.choices import Launcher

SCHEDULER_ARTEFACTS = ("pod-affinity", "kube-scheduler")
SCHEDULED = (Launcher.KUBERNETES, Launcher.SLURM)  # launchers whose placement the controller can be asked for


class UtilisationParameters(RunbookParameters):
    sample_seconds = serializers.IntegerField(
        min_value=utilisation.MIN_WINDOW_S,
        max_value=utilisation.MAX_WINDOW_S,
        default=utilisation.WINDOW_S,
        help_text="sample/verify: the sampling window (a loader period shows when it fits at least 3 times).",
    )


@register_kind
class GpuUtilisationRunbook(NcclTimeoutRunbook):
    name = UTILISATION_KIND
    label = "Runbook: GPU utilisation fluctuating"
    description = (
        "Samples the job's GPUs (nvidia-smi -lms), finds periodic dips and the GPUs the others wait for, decodes the "
        "clocks-event reasons, reads the scheduler's placement of the nodes behind, and proposes the fix "
        "(docs/diagnosis.md)."
    )
    parameters = UtilisationParameters
    rerun_on_worker_loss = True  # sampling only reads; the fix sets power limits (setting twice is harmless)

    def steps(self, parameters: dict) -> list[StepSpec]:
        phase = parameters.get("phase", Phase.SAMPLE)
        if phase == Phase.SCHEDULER:
            return [StepSpec(name="scheduler", command="", label="Placement on the nodes behind", timeout=120)]
        if phase == Phase.FIX:
            return [StepSpec(name="fix", command="", label="Put the power limits back", timeout=600)]
        seconds = parameters.get("sample_seconds", utilisation.WINDOW_S)
        return [StepSpec(name="sample", command="", label=f"Utilisation series ({seconds} s)", timeout=seconds + 120)]

    def prepare(self, job, shard) -> None:
        super().prepare(job, shard)
        training = self.incident.training_job
        self.pod_prefix = f"{training.name}-" if training else ""
        self.training_name = training.name if training else ""
        self.launcher = training.launcher if training else ""
        self.seconds = job.parameters.get("sample_seconds", utilisation.WINDOW_S)

    def step_runner(self, step: StepSpec):
        return {"sample": self._sample, "scheduler": self._scheduler, "fix": self._fix}[step.name]

    async def _read(self, target: NodeTarget, run, read, step: str, judge) -> CommandResult:
        result = await run(read.argv(), self.seconds + 60)
        if result.canceled:
            return result
        text = _text(result) if result.ok else (result.error or _text(result) or _stderr(result))
        self.seen[target.hostname, step] = judge(result.ok, text, read.text())
        return result

    async def _sample(self, target: NodeTarget, run) -> CommandResult:
        def judge(ok, text, command):
            return utilisation.judge_series(target.hostname, ok, text, command, self.seconds)

        return await self._read(target, run, utilisation.series_read(self.seconds), "sample", judge)

    async def _scheduler(self, target: NodeTarget, run) -> CommandResult:
        hosts = sorted(self.suspects)
        if self.launcher == Launcher.SLURM:

            def judge(ok, text, command):
                return utilisation.judge_slurm_jobs(hosts, self.training_name, ok, text, command)

            return await self._read(target, run, utilisation.slurm_jobs_read(), "scheduler", judge)

        def judge(ok, text, command):
            return utilisation.judge_pods(hosts, self.pod_prefix, ok, text, command)

        return await self._read(target, run, utilisation.pods_read(), "scheduler", judge)

    def shard_finished(self, job, shard) -> None:
        if self.phase == Phase.FIX or self.incident is None:
            return
        recording.record_shard_observations(
            incident=self.incident, job=job, shard=shard, seen=self.seen, steps=("sample", "scheduler")
        )

    def job_finished(self, job) -> None:
        incident = Incident.objects.select_related("training_job").get(public_id=job.parameters["incident"])
        phase = job.parameters["phase"]
        if job.status == JobStatus.CANCELED:
            return
        if phase in (Phase.SAMPLE, Phase.VERIFY):
            observations = _compare_fleet(incident, job)
            if phase == Phase.VERIFY:
                remediation = Remediation.objects.get(public_id=job.parameters["remediation"])
                settle(incident=incident, remediation=remediation, job=job)
                return
            _after_sample(incident, job, observations)
        elif phase == Phase.SCHEDULER:
            sample = incident.jobs.filter(parameters__phase=Phase.SAMPLE).order_by("-created").first()
            conclude_utilisation(incident=incident, jobs=[sample, job], job=job)
        elif phase == Phase.FIX:
            after_fix(incident, job)


def _compare_fleet(incident: Incident, job) -> list:
    """Once every node's series is in: the fleet comparison, stored as evidence; every observation of the job."""
    series = [
        (row.hostname, row.data.get("gpus", []))
        for row in incident.evidence.filter(job=job, topic="series", verdict=EvidenceVerdict.INFO).order_by("seq")
    ]
    recording.record_observations(incident=incident, job=job, observations=utilisation.fleet(series), artifacts={})
    return [recording.observation(row) for row in incident.evidence.filter(job=job)]


def _after_sample(incident: Incident, job, observations: list) -> None:
    unread = [seen for seen in observations if seen.verdict == EvidenceVerdict.COULD_NOT_RUN]
    if not any(seen.check == "series" and seen.verdict == EvidenceVerdict.INFO for seen in observations):
        reasons = "; ".join(f"{seen.hostname}: {seen.summary}" for seen in unread[:3]) or "no node answered"
        incident.state = IncidentState.UNRESOLVED
        incident.conclusion = f"The utilisation could not be sampled ({reasons}): nothing is concluded."[:2000]
        incident.save(update_fields=["state", "conclusion", "updated"])
        emit(job, incident.conclusion, level=EventLevel.WARNING, data={"incident": str(incident.public_id)})
        return
    faults = [seen for seen in observations if seen.verdict == EvidenceVerdict.FAULT]
    suspects = sorted({seen.hostname for seen in faults if seen.check in utilisation.THROTTLE_TOPICS})
    suspects = suspects or utilisation.behind_hosts(observations)
    incident.suspect_nodes.set(Node.objects.filter(hostname__in=suspects))
    symptom = next((seen for seen in faults if seen.check in ("lag", "dips")), None) or next(iter(faults), None)
    if symptom and not incident.symptom:
        incident.symptom = f"{symptom.hostname + ': ' if symptom.hostname else ''}{symptom.summary}"[:2000]
        incident.save(update_fields=["symptom", "updated"])
    training = incident.training_job
    step = utilisation.next_step(observations, recording.scores(incident))
    if step == "scheduler" and training is not None and training.launcher in SCHEDULED:
        start_phase(incident=incident, phase=Phase.SCHEDULER, user=job.requested_by)
        return
    conclude_utilisation(incident=incident, jobs=[job], job=job)


def _summaries(observations: list) -> dict[tuple[str, int], dict]:
    return {
        (seen.hostname, item["index"]): item
        for seen in observations
        if seen.check == "series"
        for item in seen.data.get("gpus", [])
    }


def scheduler_artefacts(incident: Incident) -> str:
    """The pod anti-affinity and the scheduler profile, rendered for the job's nodes with the options of the
    deployment that set them up (the plan's defaults where none did)."""
    nodes = load_nodes(incident.training_job.members.values_list("node_id", flat=True))
    deployment = Deployment.objects.filter(nodes__in=nodes).distinct().first()
    name = deployment.name if deployment else incident.training_job.name
    rendered = [
        artefacts.render(kind, deployment.options if deployment else None, artefact_nodes(nodes), deployment_name=name)
        for kind in SCHEDULER_ARTEFACTS
    ]
    return "\n---\n".join(f"# {item.filename}\n{item.content}" for item in rendered)


def conclude_utilisation(*, incident: Incident, jobs: list, job) -> Remediation | None:
    """Name the cause from the scores, propose its fix (commands, or the artefacts and a person's steps)."""
    observations = [recording.observation(row) for row in incident.evidence.filter(job__in=jobs)]
    cause = utilisation.conclude(recording.scores(incident))
    if not cause:
        behind = utilisation.behind_hosts(observations)
        incident.state = IncidentState.UNRESOLVED
        incident.conclusion = (
            f"{', '.join(behind)} behind the fleet with no clocks-event reason and no second workload found "
            "there: check its CPUs, NICs and the job's placement by hand."
            if behind
            else "The utilisation is steady: no periodic dip, no GPU behind the fleet, no reason holding a clock."
        )
        incident.save(update_fields=["state", "conclusion", "updated"])
        emit(job, incident.conclusion, data={"incident": str(incident.public_id)})
        return None
    summary, commands = utilisation.fix_for(cause, observations, _summaries(observations))
    artefact = ""
    if cause == Cause.CO_LOCATED_TRAINER and incident.training_job.launcher == Launcher.SLURM:
        controller = scheduler_controller()
        artefact = utilisation.slurm_artefact(observations, controller.hostname if controller else "")
    elif cause == Cause.CO_LOCATED_TRAINER:
        artefact = scheduler_artefacts(incident)
    incident.cause, incident.state, incident.conclusion = cause, IncidentState.CONCLUDED, summary
    incident.recurrence_of = recording._earlier_fix(incident, cause)
    incident.save(update_fields=["cause", "state", "conclusion", "recurrence_of", "updated"])
    remediation = Remediation.objects.create(
        incident=incident,
        cause=cause,
        summary=summary[:300],
        commands=[command.as_json() for command in commands],
        artefact=artefact,
    )
    emit(
        job,
        f"conclusion: {Cause(cause).label}. Proposed fix: {summary}"[:1000],
        level=EventLevel.WARNING,
        data={"incident": str(incident.public_id), "cause": cause, "remediation": str(remediation.public_id)},
    )
    return remediation


def settle(*, incident: Incident, remediation: Remediation, job) -> None:
    """After the fix: resolved when the new series shows no fault (no reason holding a clock, no GPU behind, no
    dips on every GPU)."""
    faults = list(incident.evidence.filter(job=job, verdict=EvidenceVerdict.FAULT).order_by("seq"))
    gone = not faults
    if gone:
        remediation.state = RemediationState.VERIFIED
        remediation.outcome = "Re-sampled: every GPU keeps up with the fleet, no dip, no reason holding a clock."
        incident.state, incident.resolved_at = IncidentState.RESOLVED, timezone.now()
        incident.resolution = f"{remediation.summary}. {remediation.outcome}"
    else:
        remediation.state = RemediationState.INEFFECTIVE
        left = "; ".join(f"{row.hostname} {row.topic} {row.subject}: {row.summary}".strip() for row in faults[:3])
        remediation.outcome = f"Still fluctuating: {left}"
        incident.state = IncidentState.UNRESOLVED
    remediation.save(update_fields=["state", "outcome", "updated"])
    incident.save(update_fields=["state", "resolved_at", "resolution", "updated"])
    emit(
        job,
        f"re-check: {remediation.outcome}"[:1000],
        level=EventLevel.INFO if gone else EventLevel.WARNING,
        data={"incident": str(incident.public_id), "resolved": gone},
    )
