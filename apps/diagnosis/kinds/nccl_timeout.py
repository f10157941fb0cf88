"""The `nccl-timeout` job kind: runbook 1's checks, one job per phase, each phase started by the one before.

- `log` on every node of the training job: reads the training log (tail), finds the lagging ranks, their nodes;
- `network` on the suspect nodes: MTU, link, PFC/ECN on the RDMA priority, Xids; then concludes and proposes a fix,
  or, no network cause standing out, starts
- `storage` on the same nodes: free space, mounts, I/O pressure, the data loader's workers, hung storage in dmesg;
- `fix` on the nodes of the approved fix: its exact commands;
- `verify` after a fix: the log (waiting up to `wait_seconds` for training to move again) and the checks of the
  cause's branch (network, or storage).

Shards record what they read (evidence, ranking) in shard_finished; job_finished decides the next phase from the
database (docs/jobs.md: no state is carried into it).
"""

import math

from rest_framework import serializers

from apps.diagnosis import (
    commands,  # noqa: F401  (registers tail-log)
    recording,
    storage_checks,
)
from apps.diagnosis.choices import EvidenceVerdict, IncidentState, RemediationState
from apps.diagnosis.models import Incident, Remediation
from apps.diagnosis.phases import Phase, start_phase
from apps.diagnosis.runbook import (
    NodeFacts,
    Observation,
    judge_log,
    judge_network,
    lagging,
    log_read,
    network_reads,
    suspects,
)
from apps.inventory.models import Node
from apps.jobs.choices import JobStatus, StepStatus
from apps.jobs.kinds import CellRecord, JobKind, StepSpec, default_status, default_summary, register_kind
from apps.nodeexec.base import CommandResult, NodeTarget
from apps.nodeexec.catalogue import PLACEHOLDERS, CommandError, build
from apps.nodeexec.fanout import wait_unless_canceled

KIND = "nccl-timeout"
POLL_SECONDS = 5.0
# A fix that ran but whose re-check has not confirmed it: applied (re-checking) or judged ineffective too early.
FIXED_UNCONFIRMED = (RemediationState.APPLIED, RemediationState.INEFFECTIVE)


class RunbookParameters(serializers.Serializer):
    incident = serializers.UUIDField(help_text="The incident this runbook works on.")
    phase = serializers.ChoiceField(choices=Phase.choices, default=Phase.LOG)
    log_path = serializers.RegexField(
        PLACEHOLDERS["path"].pattern, required=False, allow_blank=True, default="", help_text="The training log."
    )
    remediation = serializers.UUIDField(required=False, allow_null=True, default=None, help_text="For fix/verify.")
    wait_seconds = serializers.IntegerField(
        min_value=0, max_value=1800, default=180, help_text="verify: how long to wait for training to move again."
    )
    checkpoint_dir = serializers.RegexField(
        PLACEHOLDERS["path"].pattern,
        required=False,
        allow_blank=True,
        default="",
        help_text="storage: the training job's checkpoint directory (its volume's free space).",
    )
    branch = serializers.ChoiceField(
        choices=["network", "storage"],
        default="network",
        help_text="verify: re-check the network path, or storage and the data loader (the cause's branch).",
    )
    route = serializers.BooleanField(
        default=False, help_text="training-interrupted log phase: hand over to runbook 1 on collective timeouts only."
    )

    def validate_log_path(self, value):
        return _confined(value, "log_file")

    def validate_checkpoint_dir(self, value):
        return _confined(value, "checkpoint_path")


def _confined(value: str, placeholder: str) -> str:
    """A training job's path as the runbook will read it: under the directories its setting allows, or refused."""
    if not value:
        return value
    try:
        return PLACEHOLDERS[placeholder].check(placeholder, value)
    except CommandError as error:
        raise serializers.ValidationError(str(error).removeprefix(f"{placeholder}: ")) from None


@register_kind
class NcclTimeoutRunbook(JobKind):
    name = KIND
    label = "Runbook: NCCL timeout / hang"
    private_output = True  # the training job's log and checkpoint listings: findings cite them, operators read them
    started_through = "an incident (POST /api/incidents/{id}/runbook/; a fix phase after its remediation is approved)"
    description = (
        "Reads the training log, finds the lagging ranks and their nodes, checks MTU, PFC/ECN, links and Xids there "
        "(then free space, mounts, I/O pressure and the data loader when the network is clean), ranks the causes "
        "and proposes the fix (docs/diagnosis.md)."
    )
    parameters = RunbookParameters
    transports = ("ssh", "sim")
    rerun_on_worker_loss = True  # every phase but fix only reads; fix commands set values (setting twice is harmless)

    def __init__(self):
        self.phase = Phase.LOG
        self.incident: Incident | None = None
        self.facts: dict[str, NodeFacts] = {}
        self.rank_map: dict[int, tuple[str, int]] = {}
        self.first_host = ""
        self.wait_seconds = 0
        self.fixes: dict[str, list[dict]] = {}
        self.suspects: set[str] = set()
        self.seen: dict[tuple[str, str], list[Observation]] = {}  # (hostname, step) -> observations of the cell

    def steps(self, parameters: dict) -> list[StepSpec]:
        phase = parameters.get("phase", Phase.LOG)
        log = StepSpec(name="log", command="", label="Training log", timeout=parameters.get("wait_seconds", 0) + 120)
        network = StepSpec(name="network", command="", label="MTU, link, PFC/ECN, Xid", timeout=600)
        storage = StepSpec(name="storage", command="", label="Space, mounts, I/O pressure, loader", timeout=600)
        if phase == Phase.LOG:
            return [log]
        if phase == Phase.NETWORK:
            return [network]
        if phase == Phase.STORAGE:
            return [storage]
        if phase == Phase.FIX:
            return [StepSpec(name="fix", command="", label="Apply the fix", timeout=600)]
        checks = storage if parameters.get("branch") == "storage" else network
        return [log, checks] if parameters.get("log_path") else [checks]

    def prepare(self, job, shard) -> None:
        params = job.parameters
        self.phase = params["phase"]
        self.incident = Incident.objects.select_related("training_job").get(public_id=params["incident"])
        nodes = list(job.nodes.all())
        self.facts = recording.node_facts(nodes)
        self.rank_map = recording.rank_map(self.incident)
        self.first_host = self.rank_map[0][0] if 0 in self.rank_map else ""
        self.wait_seconds = params.get("wait_seconds", 0) if self.phase == Phase.VERIFY else 0
        self.suspects = set(self.incident.suspect_nodes.values_list("hostname", flat=True))
        self.log_path = params.get("log_path", "")
        self.checkpoint_dir = params.get("checkpoint_dir", "")
        if params.get("remediation"):
            remediation = Remediation.objects.get(public_id=params["remediation"])
            for command in remediation.commands:
                self.fixes.setdefault(command["hostname"], []).append(command)

    def step_runner(self, step: StepSpec):
        runners = {
            "log": self._read_log,
            "network": self._check_network,
            "storage": self._check_storage,
            "fix": self._fix,
        }
        return runners[step.name]

    async def _read_log(self, target: NodeTarget, run) -> CommandResult:
        """Read the node's log; after a fix (verify), read it again every POLL_SECONDS, up to wait_seconds, until it
        shows what the fix should bring: node rank 0 iterating again, every other node a last attempt without a
        timeout or error. Right after a fix each log still ends in the failure it fixed: the elastic agent restarts
        the workers only after its monitor interval, and the first iteration comes after the new rendezvous."""
        read = log_read(self.log_path)
        polls = math.ceil(self.wait_seconds / POLL_SECONDS)
        first = target.hostname == self.first_host
        for poll in range(polls + 1):
            result = await run(read.argv(), 60)
            if result.canceled or not result.ok:
                return result
            seen = judge_log(target.hostname, _text(result), read.text(), self.rank_map)
            if _settled(seen, first=first) or poll == polls:
                break
            await wait_unless_canceled(POLL_SECONDS)  # a cancel cuts it short: the next read comes back canceled
        self.seen[target.hostname, "log"] = seen
        return result

    async def _check_network(self, target: NodeTarget, run) -> CommandResult:
        node = self.facts.get(target.hostname)
        if node is None or (self.phase == Phase.VERIFY and target.hostname not in self.suspects):
            self.seen[target.hostname, "network"] = []
            return CommandResult(exit_code=0, stdout=b"not a suspect node: nothing to check\n")
        outputs, transcript = await _read_each(network_reads(node), run)
        if outputs is None:
            return _transcript_result(transcript, canceled=True)
        self.seen[target.hostname, "network"] = judge_network(node, outputs)
        return _transcript_result(transcript, exit_code=0)

    async def _check_storage(self, target: NodeTarget, run) -> CommandResult:
        if self.phase == Phase.VERIFY and target.hostname not in self.suspects:
            self.seen[target.hostname, "storage"] = []
            return CommandResult(exit_code=0, stdout=b"not a suspect node: nothing to check\n")
        outputs, transcript = await _read_each(storage_checks.storage_reads(self.checkpoint_dir), run)
        if outputs is None:
            return _transcript_result(transcript, canceled=True)
        self.seen[target.hostname, "storage"] = storage_checks.judge_storage(
            target.hostname, self.checkpoint_dir, outputs
        )
        return _transcript_result(transcript, exit_code=0)

    async def _fix(self, target: NodeTarget, run) -> CommandResult:
        transcript, failed = [], False
        for command in self.fixes.get(target.hostname, []):
            argv = build(command["command"], **command["values"])
            result = await run(argv, 120)
            transcript.append(f"$ {command['text']}\n{_text(result)}{_stderr(result)}")
            if not result.ok:
                failed = True
                break
        return _transcript_result(transcript, exit_code=1 if failed else 0)

    def cell_record(self, target: NodeTarget, step: StepSpec, result: CommandResult) -> CellRecord:
        seen = self.seen.get((target.hostname, step.name))
        if seen is None:
            return super().cell_record(target, step, result)
        faults = [o for o in seen if o.verdict == EvidenceVerdict.FAULT]
        summary = "; ".join(f"{o.check} {o.subject}: {o.summary}".strip() for o in (faults or seen)[:3])
        status = StepStatus.SUCCEEDED if result.ok else default_status(result)
        return CellRecord(status, (summary or default_summary(step, result))[:300], {"faults": len(faults)})

    def shard_finished(self, job, shard) -> None:
        if self.phase == Phase.FIX or self.incident is None:
            return
        recording.record_shard_observations(
            incident=self.incident, job=job, shard=shard, seen=self.seen, steps=("log", "network", "storage")
        )

    def job_finished(self, job) -> None:
        incident = Incident.objects.select_related("training_job").get(public_id=job.parameters["incident"])
        phase = job.parameters["phase"]
        if job.status == JobStatus.CANCELED:
            return
        if phase == Phase.LOG:
            ranks = recording.rank_map(incident)
            observations = [recording.observation(row) for row in incident.evidence.filter(job=job)]
            behind = lagging(observations, ranks)
            if behind is not None:  # only the whole job's lines show who is behind: recorded once all are read
                recording.record_observations(incident=incident, job=job, observations=[behind], artifacts={})
                observations.append(behind)
            _after_log(incident, job, list(incident.evidence.filter(job=job)), suspects(observations, ranks))
        elif phase == Phase.NETWORK:
            if recording.conclude_incident(incident=incident, job=job) is None:
                start_phase(incident=incident, phase=Phase.STORAGE, user=job.requested_by)
        elif phase == Phase.STORAGE:
            recording.conclude_incident(incident=incident, job=job, storage=True)
        elif phase == Phase.FIX:
            after_fix(incident, job)
        elif phase == Phase.VERIFY:
            remediation = Remediation.objects.get(public_id=job.parameters["remediation"])
            recording.settle_verification(incident=incident, remediation=remediation, job=job)


def after_fix(incident: Incident, job, *, failed: str = "The fix job did not succeed.", applied=None) -> None:
    """The fix job ended: re-check when it succeeded (after `applied(incident, remediation)`, what the fix changed
    in Rackpilot's records), else the fix failed (`failed` says so) and the incident stays unresolved."""
    remediation = Remediation.objects.get(public_id=job.parameters["remediation"])
    if job.status != JobStatus.SUCCEEDED:
        remediation.state, remediation.outcome = RemediationState.FAILED, failed
        remediation.save(update_fields=["state", "outcome", "updated"])
        incident.state = IncidentState.UNRESOLVED
        incident.save(update_fields=["state", "updated"])
        return
    if applied is not None:
        applied(incident, remediation)
    remediation.state = RemediationState.APPLIED
    remediation.save(update_fields=["state", "updated"])
    start_phase(incident=incident, phase=Phase.VERIFY, remediation=remediation, user=job.requested_by)


def _after_log(incident: Incident, job, rows, hosts: list[str]) -> None:
    symptom = next((row for row in rows if row.topic == "watchdog"), None) or next(
        (row for row in rows if row.verdict == EvidenceVerdict.FAULT), None
    )
    if symptom and not incident.symptom:
        incident.symptom = f"{symptom.hostname}: {symptom.summary}"
        incident.save(update_fields=["symptom", "updated"])
    if not incident.remediations.exists():  # the nodes the watch named when it opened (a hung node's log is unread)
        hosts = sorted(set(hosts) | set(incident.suspect_nodes.values_list("hostname", flat=True)))
    if not hosts:
        fixed = incident.remediations.filter(state__in=FIXED_UNCONFIRMED).order_by("-created").first()
        if fixed is not None:  # run again after a fix: a log with nothing to check is the re-check the fix awaited
            recording.settle_verification(incident=incident, remediation=fixed, job=job)
            return
        incident.state = IncidentState.UNRESOLVED
        incident.conclusion = "The training log shows no lagging or failed rank: nothing to check on the nodes."
        incident.save(update_fields=["state", "conclusion", "updated"])
        return
    incident.suspect_nodes.set(Node.objects.filter(hostname__in=hosts))
    start_phase(incident=incident, phase=Phase.NETWORK, user=job.requested_by)


def _settled(seen: list[Observation], *, first: bool) -> bool:
    """Whether a node's log shows training back: rank 0's iteration lines, or another node's last attempt clean."""
    if first:
        return any(o.check == "progress" and o.verdict == EvidenceVerdict.HEALTHY for o in seen)
    return not any(o.verdict == EvidenceVerdict.FAULT for o in seen)


def _text(result: CommandResult) -> str:
    return (result.stdout or b"").decode("utf-8", errors="replace")


def _stderr(result: CommandResult) -> str:
    return (result.stderr or b"").decode("utf-8", errors="replace")


async def _read_each(reads, run) -> tuple[dict | None, list[str]]:
    """Run each read in turn: {key: (ok, text, command)} and the transcript; None for the outputs once canceled."""
    outputs, transcript = {}, []
    for read in reads:
        result = await run(read.argv(), 60)
        if result.canceled:
            return None, transcript
        text = _text(result) if result.ok else (result.error or _text(result) or _stderr(result))
        outputs[read.key] = (result.ok, text, read.text())
        transcript.append(f"$ {read.text()}\n{_text(result)}{_stderr(result)}")
    return outputs, transcript


def _transcript_result(transcript: list[str], *, exit_code: int | None = None, canceled: bool = False):
    stdout = ("\n".join(transcript) + "\n").encode() if transcript else b""
    return CommandResult(exit_code=exit_code, stdout=stdout, stdout_size=len(stdout), canceled=canceled)
