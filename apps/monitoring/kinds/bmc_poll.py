"""apps/monitoring/kinds/bmc_poll.py: `bmc-poll` reads each node's BMC (IPMI or Redfish) and stores its
temperatures, fans and power as series (docs/monitoring.md, "BMC readings"); a liquid-cooled tray's leaks and coolant
faults become health events (apps/monitoring/bmc/coolant.py). Its first shard also reads the NVLink switch trays'
BMCs (Redfish: temperatures, power, leak detectors), which are no nodes and so no cells of the matrix: the shard's
first cell reads them beside its own node's (during the fan-out, while the shard beats and a cancel reaches them),
and each one's result is an event of the job and its BMC's last result. A poll none of whose nodes has BMC settings
(a site whose only BMC settings are its switch trays') has no node's BMC to read them beside: each switch tray is then
a row of its own (BmcPoll.devices), its cell reading its BMC. Run by beat's schedule per site
(apps/monitoring/bmc/polling.py), or asked for by hand. The reading itself is apps/monitoring/bmc/clients.py."""

import asyncio

from django.conf import settings
from django.utils import timezone
from rest_framework import serializers

from apps.health.choices import Severity
from apps.inventory.models import Node, NvlinkSwitchTray
from apps.jobs.choices import EventLevel, StepStatus
from apps.jobs.events import emit
from apps.jobs.kinds import CellRecord, JobKind, StepSpec, register_kind
from apps.monitoring.bmc import clients, coolant, logins, readings
from apps.monitoring.bmc.polling import KIND, switch_trays_of, switch_trays_polled
from apps.monitoring.choices import PollResult
from apps.monitoring.models import Bmc
from apps.nodeexec.base import CommandResult, NodeTarget
from apps.nodeexec.sim import get_simulator

STEP = "bmc"
STATUS_OF = {
    PollResult.OK: StepStatus.SUCCEEDED,
    PollResult.PARTIAL: StepStatus.SUCCEEDED,
    PollResult.AUTH_FAILED: StepStatus.FAILED,
    PollResult.UNREACHABLE: StepStatus.FAILED,
    PollResult.ERROR: StepStatus.ERROR,
}


class BmcPollParameters(serializers.Serializer):
    site = serializers.SlugField(
        required=False, allow_blank=True, default="", help_text="The site whose schedule asked for this poll."
    )


@register_kind
class BmcPoll(JobKind):
    name = KIND
    label = "BMC readings"
    description = (
        "Reads each node's BMC over IPMI (ipmitool sdr, dcmi power reading) or Redfish (Thermal, Power, "
        "EnvironmentMetrics) and stores temperatures, fan speeds and power; and the NVLink switch trays' BMCs "
        "(Redfish: temperatures, power, leak detectors)."
    )
    parameters = BmcPollParameters
    transports = ("local", "sim")  # BMCs are read from the worker's host (the management network), never over ssh
    rerun_on_worker_loss = True  # read-only on the BMCs; readings are written once, when the shard ends
    device_noun = "switch tray"

    def __init__(self):
        self.logins: dict[str, tuple[int, logins.BmcLogin]] = {}
        # The NVLink switch trays': every one, read by the first shard beside its first node; or, where they are
        # rows of their own (tray_rows), those of the shard's rows.
        self.tray_logins: dict[str, tuple[int, logins.BmcLogin]] = {}
        self.tray_outcomes: dict[str, readings.PollOutcome] = {}
        self.tray_rows = False
        self.trays_started = False
        self.outcomes: dict[tuple[str, str], readings.PollOutcome] = {}
        self.transport = "local"
        self.at = timezone.now()
        self.seed, self.load = 0, 0.0

    @property
    def default_transport(self) -> str | None:
        return settings.RACKPILOT_BMC_TRANSPORT or None  # None: the install's, as JobKind.default_transport says

    def steps(self, parameters: dict) -> list[StepSpec]:
        timeout = float(settings.RACKPILOT_BMC_TIMEOUT_SECONDS)
        return [StepSpec(STEP, "", "BMC", timeout=timeout * 4 + 5, stop_on_failure=False)]

    def devices(self, nodes: list, parameters: dict) -> list[str]:
        """The switch trays with BMC settings, as rows of their own, where none of the poll's nodes has BMC settings
        (none whose cell would read them beside its own BMC): a site whose only BMC settings are its switch trays'."""
        ids = [node.pk for node in nodes]
        if Bmc.objects.filter(node_id__in=ids).exists():
            return []
        trays = switch_trays_of(site=parameters.get("site", ""), nodes=Node.objects.filter(pk__in=ids))
        return list(trays.filter(bmc__isnull=False).order_by("name").values_list("name", flat=True))

    def prepare(self, job, shard) -> None:
        self.logins = logins.shard_logins(shard)
        if job.devices:
            self.tray_rows = True
            rows = shard.steps.filter(node__isnull=True, hostname__in=job.devices).values("hostname")
            self.tray_logins = logins.switch_tray_logins(NvlinkSwitchTray.objects.filter(name__in=rows))
        elif shard.index == 0:
            self.tray_logins = logins.switch_tray_logins(switch_trays_polled(job))
        self.transport = job.transport
        self.at = readings.polled_at(timezone.now())
        simulator = get_simulator()
        self.seed = getattr(simulator, "seed", settings.RACKPILOT_SIM_SEED)
        self.load = getattr(simulator, "load", 0.0)

    def step_runner(self, step: StepSpec):
        timeout = float(settings.RACKPILOT_BMC_TIMEOUT_SECONDS)

        async def read(target: NodeTarget, run) -> CommandResult:
            trays = None
            if self.tray_logins and not self.tray_rows and not self.trays_started:  # read beside this cell's node
                self.trays_started = True
                trays = asyncio.ensure_future(self._poll_switch_trays(timeout))
            tray = self.tray_logins.get(target.hostname) if self.tray_rows else None
            found = self.logins.get(target.hostname)
            if tray is not None:  # this row is a switch tray's
                outcome = self.tray_outcomes[target.hostname] = await self._read_switch_tray(*tray, timeout)
            elif found is None:
                outcome = readings.PollOutcome(PollResult.ERROR, f"{target.hostname} has no BMC settings")
            else:
                node_id, login = found
                ipmi, redfish = clients.bmc_link(
                    login, node_id, transport=self.transport, timeout=timeout, seed=self.seed,
                    load=self.load, at=self.at,
                )  # fmt: skip
                outcome = await clients.poll(login, ipmi=ipmi, redfish=redfish)
            if trays is not None:
                self.tray_outcomes = await trays
            self.outcomes[target.hostname, step.name] = outcome
            ok = outcome.result in (PollResult.OK, PollResult.PARTIAL)
            stdout, stderr = outcome.transcript.encode(), b"" if ok else (outcome.message + "\n").encode()
            # The sizes say there is output to keep: the BMC's transcript is the cell's artifact.
            return CommandResult(
                exit_code=0 if ok else 1, stdout=stdout, stderr=stderr, stdout_size=len(stdout), stderr_size=len(stderr)
            )

        return read

    def cell_record(self, target: NodeTarget, step: StepSpec, result: CommandResult) -> CellRecord:
        outcome = self.outcomes.get((target.hostname, step.name))
        if outcome is None:  # canceled or timed out before the poll ended
            return super().cell_record(target, step, result)
        return CellRecord(
            STATUS_OF[outcome.result],
            outcome.summary(),
            {"bmc_result": outcome.result, "readings": len(outcome.readings)},
        )

    def shard_finished(self, job, shard) -> None:
        polled = [(hostname, outcome) for (hostname, _), outcome in self.outcomes.items() if hostname in self.logins]
        by_node = {self.logins[host][0]: outcome for host, outcome in polled}
        written = readings.record_polls(by_node, at=self.at)
        for event in coolant.judge_coolant(outcomes=by_node, at=self.at):
            level = EventLevel.ERROR if event.severity == Severity.CRITICAL else EventLevel.WARNING
            emit(job, event.summary, level=level, hostname=event.node.hostname if event.node else "", step=STEP)
        for hostname, outcome in polled:
            if outcome.result == PollResult.AUTH_FAILED:  # the finding an operator must act on: fix the login
                emit(job, outcome.message, level=EventLevel.ERROR, hostname=hostname, step=STEP)
        trays = 0
        if self.tray_logins:
            trays, stored = self._switch_trays(job)
            written += stored
        emit(job, f"{written} BMC readings stored from {self.counted_targets(len(polled), trays)}")

    def _switch_trays(self, job) -> tuple[int, int]:
        """Stores the NVLink switch trays' readings and results and records the leaks they read: (how many switch
        trays, how many readings). Read beside a node, each one's result is an event (an error where it could not be
        read), and one the fan-out ended before (its cell timed out) is an error too; read in rows of their own, each
        one's cell says how it went, and one whose cell ended first read nothing."""
        if self.tray_rows:
            outcomes = {name: outcome for name, outcome in self.tray_outcomes.items() if name in self.tray_logins}
        else:
            ended = readings.PollOutcome(PollResult.ERROR, "not read: the poll's first cell ended before it")
            outcomes = {name: self.tray_outcomes.get(name) or ended for name in self.tray_logins}
        by_tray = {self.tray_logins[name][0]: outcome for name, outcome in outcomes.items()}
        written = readings.record_polls(by_tray, at=self.at, owner="switch_tray")
        for event in coolant.judge_switch_tray_leaks(outcomes=by_tray, at=self.at):
            emit(job, event.summary, level=EventLevel.ERROR, step=STEP)
        for name, outcome in [] if self.tray_rows else sorted(outcomes.items()):
            read = outcome.result in (PollResult.OK, PollResult.PARTIAL)
            level = EventLevel.INFO if read else EventLevel.ERROR
            emit(job, f"{name}: {outcome.summary()}", level=level, step=STEP, data={"bmc_result": outcome.result})
        return len(outcomes), written

    async def _poll_switch_trays(self, timeout: float) -> dict[str, readings.PollOutcome]:
        """Every switch tray's BMC at once, each within a cell's time."""
        names = sorted(self.tray_logins)
        found = await asyncio.gather(*(self._read_switch_tray(*self.tray_logins[name], timeout) for name in names))
        return dict(zip(names, found, strict=True))

    async def _read_switch_tray(self, tray_id: int, login: logins.BmcLogin, timeout: float) -> readings.PollOutcome:
        """One switch tray's BMC, within its requests' timeouts, four of them."""
        ipmi, redfish = clients.bmc_link(
            login, tray_id, transport=self.transport, timeout=timeout, seed=self.seed, load=self.load,
            at=self.at, switch_tray=True,
        )  # fmt: skip
        try:
            return await asyncio.wait_for(clients.poll(login, ipmi=ipmi, redfish=redfish), timeout * 4)
        except TimeoutError:
            return readings.PollOutcome(PollResult.UNREACHABLE, f"{login.name} did not answer within {timeout * 4:g} s")
