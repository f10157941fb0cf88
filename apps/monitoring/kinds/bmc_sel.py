"""apps/monitoring/kinds/bmc_sel.py: `bmc-sel` reads each node's BMC event log (IPMI `sel elist`, Redfish SEL
LogService Entries) and turns the records after its high-water mark into health events (docs/monitoring.md, "The
BMC event log"). Started every RACKPILOT_BMC_SEL_SECONDS by beat (apps/monitoring/bmc/polling.py), or by hand. The
reading and the recording are apps/monitoring/bmc/sel.py."""

from django.conf import settings
from rest_framework import serializers

from apps.jobs.choices import EventLevel, StepStatus
from apps.jobs.events import emit
from apps.jobs.kinds import CellRecord, JobKind, StepSpec, register_kind
from apps.monitoring.bmc import clients, logins
from apps.monitoring.bmc.sel import SelOutcome, read_sel, record_sel
from apps.monitoring.choices import PollResult
from apps.nodeexec.base import CommandResult, NodeTarget
from apps.nodeexec.bmc import SEL_KIND
from apps.nodeexec.sim import get_simulator

STEP = "sel"
STATUS_OF = {
    PollResult.OK: StepStatus.SUCCEEDED,
    PollResult.AUTH_FAILED: StepStatus.FAILED,
    PollResult.UNREACHABLE: StepStatus.FAILED,
    PollResult.ERROR: StepStatus.ERROR,
}


class BmcSelParameters(serializers.Serializer):
    pass


@register_kind
class BmcSel(JobKind):
    name = SEL_KIND
    label = "BMC event log"
    description = (
        "Reads each node's BMC event log (ipmitool sel elist, Redfish SEL entries) and records the new records that "
        "matter (uncorrectable ECC, PSU failure, critical temperature, PCIe fatal, watchdog, processor errors) as "
        "health events."
    )
    parameters = BmcSelParameters
    transports = ("local", "sim")  # from the worker's host (the management network), never over ssh
    rerun_on_worker_loss = True  # read-only on the BMCs; the high-water mark keeps a re-read from recording twice

    def __init__(self):
        self.logins: dict[str, tuple[int, logins.BmcLogin]] = {}
        self.outcomes: dict[str, SelOutcome] = {}
        self.transport = "local"
        self.seed = 0

    @property
    def default_transport(self) -> str | None:
        return settings.RACKPILOT_BMC_TRANSPORT or None

    def steps(self, parameters: dict) -> list[StepSpec]:
        timeout = float(settings.RACKPILOT_BMC_TIMEOUT_SECONDS)
        return [StepSpec(STEP, "", "Event log", timeout=timeout * (4 + 20) + 5, stop_on_failure=False)]

    def prepare(self, job, shard) -> None:
        self.logins = logins.shard_logins(shard)
        self.transport = job.transport
        self.seed = getattr(get_simulator(), "seed", settings.RACKPILOT_SIM_SEED)

    def step_runner(self, step: StepSpec):
        timeout = float(settings.RACKPILOT_BMC_TIMEOUT_SECONDS)

        async def read(target: NodeTarget, run) -> CommandResult:
            found = self.logins.get(target.hostname)
            if found is None:
                outcome = SelOutcome(PollResult.ERROR, f"{target.hostname} has no BMC settings")
            else:
                node_id, login = found
                ipmi, redfish = clients.bmc_link(
                    login, node_id, transport=self.transport, timeout=timeout, seed=self.seed
                )
                outcome = await read_sel(login, ipmi=ipmi, redfish=redfish)
            self.outcomes[target.hostname] = outcome
            ok = outcome.result == PollResult.OK
            stdout, stderr = outcome.transcript.encode(), b"" if ok else (outcome.message + "\n").encode()
            return CommandResult(
                exit_code=0 if ok else 1,
                stdout=stdout,
                stderr=stderr,
                stdout_size=len(stdout),
                stderr_size=len(stderr),
            )

        return read

    def cell_record(self, target: NodeTarget, step: StepSpec, result: CommandResult) -> CellRecord:
        outcome = self.outcomes.get(target.hostname)
        if outcome is None:
            return super().cell_record(target, step, result)
        data = {"bmc_result": outcome.result, "records": len(outcome.records)}
        return CellRecord(STATUS_OF[outcome.result], outcome.message[:300], data)

    def shard_finished(self, job, shard) -> None:
        recorded = 0
        for hostname, outcome in self.outcomes.items():
            if outcome.result != PollResult.OK:
                emit(job, outcome.message, level=EventLevel.ERROR, hostname=hostname, step=STEP)
                continue
            if hostname in self.logins:
                recorded += record_sel(node_id=self.logins[hostname][0], records=outcome.records, job=job)
        emit(job, f"{recorded} health events from the BMC event logs of {len(self.outcomes)} nodes")
