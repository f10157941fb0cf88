"""The `training-interrupted` job kind: runbook 3's checks and the automatic recovery, one job per phase.

- `log` on every node of the training job: what stopped the last attempt (full disk, failed save, a checkpoint that
  does not load, a CUDA error / Xid, the root-cause rank); a job that only timed out in a collective is handed to
  runbook 1 (the fabric checks);
- `checks` on every node: Xids / uncorrectable ECC in the kernel log; on node rank 0 also the checkpoint tier's free
  space (`df`), the checkpoints there (`ls`), and the newest ones' shards, marker, manifest (`sha256sum -c`) and load,
  newest first until one is valid; then the recovery is planned (apps/diagnosis/recovery.py) and proposed, or run at
  once when the job's policy is automatic and retries are left;
- `fix`: the recovery's exact commands (remove checkpoints, then the resume: torchrun on every node, or sbatch /
  the Job manifest applied on the scheduler's controller);
- `verify`: node rank 0's log (polled up to `wait_seconds`) until it shows the resume from the chosen step and steps.
"""

import time
import uuid

from django.utils import timezone

from apps.core.text import counted
from apps.deployments.node_operations import scheduler_controller
from apps.diagnosis import quarantine, recording, recovery, services
from apps.diagnosis.choices import RUNBOOK_CAUSES, Cause, EvidenceVerdict, IncidentState, RemediationState
from apps.diagnosis.kinds.nccl_timeout import NcclTimeoutRunbook, _text, _transcript_result, after_fix
from apps.diagnosis.models import Hypothesis, Incident, Remediation
from apps.diagnosis.phases import RECOVERY_KIND, Phase, start_phase
from apps.diagnosis.runbook import Observation, Read, log_read
from apps.inventory.models import Node
from apps.jobs.choices import EventLevel, JobStatus
from apps.jobs.events import emit
from apps.jobs.kinds import StepSpec, register_kind
from apps.nodeexec.base import CommandResult, NodeTarget
from apps.nodeexec.fanout import wait_unless_canceled
from apps.workloads.choices import Launcher, RecoveryPolicy, TrainingState
from apps.workloads.models import InferenceService, TrainingJob
from apps.workloads.services import move_training_job

STATE_COMMAND = "(the training job's record in Rackpilot)"


def job_facts(job: TrainingJob) -> recovery.JobFacts:
    members = job.members.select_related("node").order_by("node_rank")
    return recovery.JobFacts(
        name=job.name,
        launcher=job.launcher,
        hosts=tuple(member.node.hostname for member in members),
        ranks_per_node=job.ranks_per_node,
        checkpoint_dir=job.checkpoint_dir or f"/checkpoints/{job.name}",
        entrypoint=job.entrypoint,
        keep=job.checkpoint_keep,
        state=job.state,
    )


def training_moves(seen: list[Observation], *, resume_step: int | None) -> bool:
    """Whether the log read shows training stepping; after a resume, stepping on from that step (what
    settle_recovery asks for): the read right after the relaunch may still end with the stopped attempt's steps."""
    return any(
        o.check == "progress"
        and o.verdict == EvidenceVerdict.HEALTHY
        and (resume_step is None or o.data.get("resumed_from") == resume_step)
        for o in seen
    )


@register_kind
class TrainingInterruptedRunbook(NcclTimeoutRunbook):
    name = RECOVERY_KIND
    label = "Runbook: training interrupted"
    description = (
        "Reads the training log, checks the checkpoint tier's space, the newest checkpoints (shards, marker, hash "
        "manifest, load) and the nodes' Xids, then resumes from the newest valid checkpoint (docs/diagnosis.md)."
    )
    rerun_on_worker_loss = False  # the fix relaunches the job: running it twice would start it twice

    def steps(self, parameters: dict) -> list[StepSpec]:
        phase = parameters.get("phase", Phase.LOG)
        if phase == Phase.CHECKS:
            return [StepSpec(name="checks", command="", label="Space, checkpoints, Xids", timeout=3600)]
        if phase == Phase.FIX:
            return [StepSpec(name="fix", command="", label="Free space and resume", timeout=600)]
        wait = parameters.get("wait_seconds", 0) if phase == Phase.VERIFY else 0
        return [StepSpec(name="log", command="", label="Training log", timeout=wait + 120)]

    def prepare(self, job, shard) -> None:
        super().prepare(job, shard)
        self.job = job_facts(self.incident.training_job) if self.incident.training_job else None
        self.first_host = self.job.hosts[0] if self.job and self.job.hosts else ""
        self.resume_step = None
        if self.phase == Phase.VERIFY:
            self.first_host = next(iter(sorted(node.hostname for node in job.nodes.all())), "")
            if job.parameters.get("remediation"):
                plan = Remediation.objects.get(public_id=job.parameters["remediation"]).plan or {}
                self.resume_step = plan.get("resume_step")

    def step_runner(self, step: StepSpec):
        return {"log": self._read_log, "checks": self._checks, "fix": self._fix}[step.name]

    async def _read_log(self, target: NodeTarget, run) -> CommandResult:
        read = log_read(self.log_path)
        deadline = time.monotonic() + (self.wait_seconds if target.hostname == self.first_host else 0)
        while True:
            result = await run(read.argv(), 60)
            if result.canceled or not result.ok:
                return result
            seen = recovery.judge_log(target.hostname, _text(result), read.text())
            moving = training_moves(seen, resume_step=self.resume_step)
            if moving or time.monotonic() >= deadline:
                self.seen[target.hostname, "log"] = seen
                return result
            await wait_unless_canceled(5.0)  # a cancel cuts it short: the next read comes back canceled

    async def _checks(self, target: NodeTarget, run) -> CommandResult:
        transcript, seen = [], []

        async def read(item: Read) -> tuple[bool, str, str]:
            result = await run(item.argv(), 1800 if item.command == "checkpoint-load" else 60)
            out, err = _text(result), (result.stderr or b"").decode("utf-8", errors="replace")
            transcript.append(f"$ {item.text()}\n{out}{err}")
            return result.ok, (out if result.ok else (out + err) or result.error or ""), item.text()

        dmesg = Read("dmesg", "dmesg")
        seen.append(recovery.judge_kernel(target.hostname, *await read(dmesg)))
        if self.job is not None:  # every node: a local (hot) tier fills per node, a shared one for all
            directory = self.job.checkpoint_dir
            df, ls = recovery.storage_reads(directory)
            space = recovery.judge_space(target.hostname, *await read(df))
            space.hostname = target.hostname
            seen.append(space)
        if self.job is not None and target.hostname == self.first_host:
            ok, text, command = await read(ls)
            steps = recovery.checkpoint_steps(text) if ok else []
            seen.append(
                Observation(
                    "listing",
                    directory,
                    EvidenceVerdict.INFO if ok else EvidenceVerdict.COULD_NOT_RUN,
                    f"{counted(len(steps), 'checkpoint')}: " + (", ".join(f"step {s}" for s in steps[-6:]) or "none")
                    if ok
                    else f"could not list: {text[-200:]}",
                    command,
                    text.strip()[-1000:],
                    target.hostname,
                    {"steps": steps},
                )
            )
            world = len(self.job.hosts) * self.job.ranks_per_node
            for step in sorted(steps, reverse=True)[: recovery.CHECKED_CHECKPOINTS]:
                outputs = {}
                for item in recovery.checkpoint_reads(directory, step):
                    outputs[item.key] = await read(item)
                verdict = recovery.judge_checkpoint(
                    target.hostname, step, recovery.checkpoint_path(directory, step), world, outputs
                )
                seen += verdict.observations
                if verdict.valid:
                    break
        self.seen[target.hostname, "checks"] = seen
        return _transcript_result(transcript, exit_code=0)

    def shard_finished(self, job, shard) -> None:
        if self.phase == Phase.FIX or self.incident is None:
            return
        recording.record_shard_observations(
            incident=self.incident, job=job, shard=shard, seen=self.seen, steps=("log", "checks")
        )

    def job_finished(self, job) -> None:
        incident = Incident.objects.select_related("training_job").get(public_id=job.parameters["incident"])
        phase = job.parameters["phase"]
        if job.status == JobStatus.CANCELED:
            return
        if phase == Phase.LOG:
            _after_log(incident, job)
        elif phase == Phase.CHECKS:
            conclude_recovery(incident=incident, job=job)
        elif phase == Phase.FIX:
            after_fix(incident, job, failed="The recovery job did not succeed.", applied=_moved)
        elif phase == Phase.VERIFY:
            remediation = Remediation.objects.get(public_id=job.parameters["remediation"])
            settle_recovery(incident=incident, remediation=remediation, job=job)


def _after_log(incident: Incident, job) -> None:
    training = incident.training_job
    state = Observation(
        "state",
        training.name,
        EvidenceVerdict.FAULT
        if training.state in (TrainingState.FAILED, TrainingState.INTERRUPTED)
        else EvidenceVerdict.INFO,
        f"{training.name} is {training.get_state_display().lower()} ({training.world_size} ranks on "
        f"{counted(training.members.count(), 'node')}, launcher {training.get_launcher_display()})",
        STATE_COMMAND,
        data={"state": training.state},
    )
    recording.record_observations(incident=incident, job=job, observations=[state], artifacts={})
    rows = list(incident.evidence.filter(job=job))
    # the root cause first, its consequences after
    order = ("disk", "checkpoint", "cuda", "fabric", "worker", "watchdog")
    faults = [row for row in rows if row.verdict == EvidenceVerdict.FAULT and row.topic in order]
    symptom = min(faults, key=lambda row: (order.index(row.topic), row.seq), default=None)
    if symptom and not incident.symptom:
        incident.symptom = f"{symptom.hostname}: {symptom.summary}"[:2000]
        incident.save(update_fields=["symptom", "updated"])
    topics = {row.topic for row in rows if row.verdict == EvidenceVerdict.FAULT}
    if job.parameters.get("route") and recovery.route(topics) != RECOVERY_KIND:
        # Only ranks timing out in a collective or a fabric port down: the fabric is suspect, runbook 1 takes over
        # from its first phase.
        incident.runbook = "nccl-timeout"
        incident.save(update_fields=["runbook", "updated"])
        Hypothesis.objects.filter(incident=incident, cause__in=RUNBOOK_CAUSES[RECOVERY_KIND]).delete()
        why = "a fabric port down" if "fabric" in topics else "only NCCL watchdog timeouts"
        emit(job, f"triage: {why}: runbook 1 (NCCL timeout / hang) takes over")
        start_phase(incident=incident, phase=Phase.LOG, user=job.requested_by)
        return
    start_phase(incident=incident, phase=Phase.CHECKS, user=job.requested_by)


def _verdicts(rows) -> tuple[list[int], list[recovery.CheckpointVerdict]]:
    steps: list[int] = []
    by_step: dict[int, recovery.CheckpointVerdict] = {}
    for row in rows:
        if row.topic == "listing":
            steps = list(row.data.get("steps", []))
        elif row.topic in ("shards", "marker", "manifest", "load") and "step" in row.data:
            step = int(row.data["step"])
            verdict = by_step.setdefault(step, recovery.CheckpointVerdict(step, row.data["path"], valid=True))
            verdict.valid = verdict.valid and row.verdict == EvidenceVerdict.HEALTHY
            if row.topic == "marker" and row.verdict == EvidenceVerdict.FAULT:
                verdict.incomplete = True
    return steps, list(by_step.values())


def spares_for(*, training: TrainingJob, bad_hosts: list[str]) -> dict[str, str]:
    """A healthy spare of the same GPU SKU for each bad node: a compute node in service, not drained, not in an
    active training job, not serving an active inference service, not in an active incident, not suspected
    anywhere; each spare used once."""
    busy = (
        set(TrainingJob.objects.active().exclude(pk=training.pk).values_list("members__node__hostname", flat=True))
        | set(training.members.values_list("node__hostname", flat=True))
        | set(InferenceService.objects.active().values_list("nodes__hostname", flat=True))
    )
    troubled = set(Incident.objects.active().values_list("node__hostname", flat=True)) | set(
        Incident.objects.active().exclude(training_job=training).values_list("suspect_nodes__hostname", flat=True)
    )
    chosen: dict[str, str] = {}
    for host in bad_hosts:
        bad = Node.objects.filter(hostname=host).first()
        if bad is None or bad.gpu_sku_id is None:
            continue
        candidates = (
            Node.objects.compute()
            .in_service()
            .undrained()
            .filter(gpu_sku_id=bad.gpu_sku_id)
            .exclude(hostname__in=busy | troubled | set(chosen.values()))
            .order_by("hostname")
        )
        spare = candidates.first()
        if spare is not None:
            chosen[host] = spare.hostname
    return chosen


def automatic_attempts(training: TrainingJob) -> int:
    """Automatic recoveries of the job since the last one that was verified (each retry counts)."""
    recoveries = Remediation.objects.filter(
        incident__training_job=training, cause__in=RUNBOOK_CAUSES[RECOVERY_KIND]
    ).order_by("created")
    count = 0
    for item in recoveries:
        if item.state == RemediationState.VERIFIED:
            count = 0
        elif item.plan.get("automatic"):
            count += 1
    return count


def conclude_recovery(*, incident: Incident, job) -> Remediation | None:
    """After the checks: name the cause, plan the recovery and propose it (or run it, policy allowing)."""
    training = incident.training_job
    rows = list(incident.evidence.filter(job=job))
    steps, verdicts = _verdicts(rows)
    scores = recording.scores(incident)
    cause = max(
        RUNBOOK_CAUSES[RECOVERY_KIND],
        key=lambda c: (scores.get(c, 0), -RUNBOOK_CAUSES[RECOVERY_KIND].index(c)),
    )
    # A checkpoint-aware quarantine drained a node of the job: the resume leaves it out, approved by that policy.
    quarantined = quarantine.quarantines_resumed_by(incident)
    if scores.get(cause, 0) <= 0:
        cause = Cause.BAD_NODE if quarantined else Cause.WORKER_CRASH
    # Full: nothing left, or less than the next save needs (the size of a whole checkpoint).
    needed = max((row.data.get("bytes", 0) for row in rows if row.topic == "shards"), default=0)
    full_on = sorted(
        {
            row.hostname
            for row in rows
            if row.topic == "space" and "available" in row.data and row.data["available"] <= max(needed - 1, 0)
        }
    )
    disk_full = bool(full_on)
    incident.suspect_nodes.add(*Node.objects.filter(hostname__in=full_on))
    bad_hosts = sorted(
        {row.hostname for row in rows if row.topic == "xid" and row.verdict == EvidenceVerdict.FAULT}
        | {decision.node.hostname for decision in quarantined if decision.node is not None}
    )
    incident.suspect_nodes.add(*Node.objects.filter(hostname__in=bad_hosts))
    facts = job_facts(training)
    rendezvous = f"{training.name}-r{uuid.uuid4().hex[:8]}"[:80]
    plan = recovery.plan_recovery(
        job=facts,
        cause=cause,
        steps=steps,
        verdicts=verdicts,
        disk_full=disk_full,
        bad_hosts=bad_hosts,
        spares=spares_for(training=training, bad_hosts=bad_hosts),
        rendezvous=rendezvous,
        controller=_controller(training),
    )
    if plan is None:
        checked = ", ".join(f"step {v.step}" for v in sorted(verdicts, key=lambda v: -v.step)) or "none found"
        incident.cause, incident.state = cause, IncidentState.UNRESOLVED
        incident.conclusion = (
            f"No valid checkpoint to resume from in {facts.checkpoint_dir} (checked: {checked}): nothing was run. "
            "Restore a checkpoint from the cold tier or restart from scratch by hand."
        )
        incident.save(update_fields=["cause", "state", "conclusion", "updated"])
        emit(job, incident.conclusion, level=EventLevel.WARNING, data={"incident": str(incident.public_id)})
        return None
    quarantine.note_resume(incident=incident, resume_step=plan.resume_step)
    automatic = bool(plan.commands) and (
        bool(quarantined)
        or (
            training.recovery_policy == RecoveryPolicy.AUTOMATIC
            and automatic_attempts(training) < training.recovery_max_retries
        )
    )
    incident.cause, incident.state, incident.conclusion = cause, IncidentState.CONCLUDED, plan.summary
    incident.recurrence_of = recording._earlier_fix(incident, cause) if bad_hosts else None
    incident.save(update_fields=["cause", "state", "conclusion", "recurrence_of", "updated"])
    remediation = Remediation.objects.create(
        incident=incident,
        cause=cause,
        summary=plan.summary[:300],
        commands=[command.as_json() for command in plan.commands],
        artefact=plan.artefact,
        plan={
            "resume_step": plan.resume_step,
            "hosts": list(plan.hosts),
            "removed": plan.removed,
            "excluded": plan.excluded,
            "replaced": plan.replaced,
            "rendezvous": rendezvous,
            "automatic": automatic,
        },
    )
    emit(
        job,
        f"recovery: {plan.summary}" + (" (automatic: runs now)" if automatic else " (waiting for an operator)"),
        level=EventLevel.WARNING,
        data={"incident": str(incident.public_id), "cause": cause, "remediation": str(remediation.public_id)},
    )
    if automatic:
        services.approve_remediation(remediation=remediation, user=None, automatic=True)
    elif training.recovery_policy == RecoveryPolicy.AUTOMATIC and plan.commands:
        emit(
            job,
            f"automatic recovery stopped: {training.recovery_max_retries} retries used; an operator approves now",
            level=EventLevel.WARNING,
            data={"incident": str(incident.public_id)},
        )
    return remediation


def _controller(training: TrainingJob) -> str:
    """Where a scheduler's resume runs: the deployments' scheduler controller (a management node with scontrol or
    kubectl); '' for torchrun, or when the inventory has none (the resume is then shown for a person)."""
    if training.launcher not in (Launcher.SLURM, Launcher.KUBERNETES):
        return ""
    controller = scheduler_controller()
    return controller.hostname if controller is not None else ""


def _moved(incident: Incident, remediation: Remediation) -> None:
    """After the resume ran: the job runs on the plan's nodes now, and is running again."""
    training = incident.training_job
    hosts = remediation.plan.get("hosts") or []
    nodes = {node.hostname: node for node in Node.objects.filter(hostname__in=hosts)}
    if hosts and all(host in nodes for host in hosts):
        move_training_job(
            job=training, nodes=[nodes[host] for host in hosts], reason=f"recovery {remediation.public_id}"
        )
    if remediation.plan.get("resume_step") is not None:
        TrainingJob.objects.filter(pk=training.pk).update(state=TrainingState.RUNNING)


def settle_recovery(*, incident: Incident, remediation: Remediation, job) -> None:
    """Resolved only when node rank 0's log shows the resume from the chosen step and steps after it."""
    rows = list(incident.evidence.filter(job=job))
    step = remediation.plan.get("resume_step")
    progress = next((row for row in rows if row.topic == "progress"), None)
    resumed = progress is not None and progress.data.get("resumed_from") == step
    moving = progress is not None and progress.verdict == EvidenceVerdict.HEALTHY
    faults = [row for row in rows if row.verdict == EvidenceVerdict.FAULT]
    gone = resumed and moving and not faults
    if gone:
        remediation.state = RemediationState.VERIFIED
        remediation.outcome = (
            f"Resumed from step {step}; training advances (newest step {progress.data.get('last_step')})."
        )
        incident.state, incident.resolved_at = IncidentState.RESOLVED, timezone.now()
        incident.resolution = f"{remediation.summary}. {remediation.outcome}"
    else:
        remediation.state = RemediationState.INEFFECTIVE
        left = "; ".join(f"{row.hostname} {row.topic}: {row.summary}" for row in faults[:3])
        remediation.outcome = (
            ("Still failing: " + left)
            if left
            else f"The log does not show training resumed from step {step} and advancing yet."
        )
        incident.state = IncidentState.UNRESOLVED
    remediation.save(update_fields=["state", "outcome", "updated"])
    incident.save(update_fields=["state", "resolved_at", "resolution", "updated"])
    emit(
        job,
        f"re-check: {remediation.outcome}",
        level=EventLevel.INFO if gone else EventLevel.WARNING,
        data={"incident": str(incident.public_id), "resolved": gone},
    )
    training = TrainingJob.objects.get(pk=incident.training_job_id)
    retry = not gone and remediation.plan.get("automatic") and training.recovery_policy == RecoveryPolicy.AUTOMATIC
    if retry and automatic_attempts(training) < training.recovery_max_retries:
        start_phase(incident=incident, phase=Phase.LOG, user=job.requested_by)  # another bounded retry
