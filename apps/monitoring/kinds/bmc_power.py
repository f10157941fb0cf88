"""apps/monitoring/kinds/bmc_power.py: `bmc-power` tells each node's BMC to power it on, off, cycle or reset it (or
only reads its power), then reads the power back (docs/monitoring.md, "Power through the BMC"). Started by
apps/monitoring/bmc/power.py's start_bmc_power (the node page, the API) or by remediation (by its kind name). The
flows are apps/monitoring/bmc/power.py."""

from django.conf import settings
from django.utils import timezone
from rest_framework import serializers

from apps.health.choices import Severity, Source
from apps.health.services import Component, record_event
from apps.inventory.models import Node
from apps.jobs.choices import EventLevel, StepStatus
from apps.jobs.events import emit
from apps.jobs.kinds import CellRecord, JobKind, StepSpec, register_kind
from apps.monitoring.bmc import clients, logins, readings
from apps.monitoring.bmc.power import MISMATCH, PowerOutcome, nodes_without_bmc, power
from apps.monitoring.choices import PollResult
from apps.nodeexec.base import CommandResult, NodeTarget
from apps.nodeexec.bmc import POWER_ACTIONS, POWER_KIND
from apps.nodeexec.sim import get_simulator

STEP = "power"
STATUS_OF = {
    PollResult.OK: StepStatus.SUCCEEDED,
    MISMATCH: StepStatus.FAILED,
    PollResult.AUTH_FAILED: StepStatus.FAILED,
    PollResult.UNREACHABLE: StepStatus.FAILED,
    PollResult.ERROR: StepStatus.ERROR,
}


class BmcPowerParameters(serializers.Serializer):
    action = serializers.ChoiceField(choices=POWER_ACTIONS, help_text="What to tell the BMC: read, or change, power.")
    reason = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=300, help_text="Why (kept in the audit log)."
    )


@register_kind
class BmcPower(JobKind):
    name = POWER_KIND
    label = "Power through the BMC"
    description = (
        "Tells each node's BMC to power it on, off, cycle or reset it (ipmitool chassis power, Redfish "
        "ComputerSystem.Reset), then reads the power back; succeeds only when it agrees."
    )
    parameters = BmcPowerParameters
    transports = ("local", "sim")  # BMCs are reached from the worker's host (the management network), never over ssh
    # The node page, the API and remediation start it: each checks the BMC login and audits the destructive ones.
    started_through = "a node's BMC power action (the node page, POST /api/nodes/{id}/bmc-power/) or remediation"

    def __init__(self):
        self.logins: dict[str, tuple[int, logins.BmcLogin]] = {}
        self.outcomes: dict[str, PowerOutcome] = {}
        self.transport = "local"
        self.seed = 0
        self.action = "status"

    @property
    def default_transport(self) -> str | None:
        return settings.RACKPILOT_BMC_TRANSPORT or None

    def steps(self, parameters: dict) -> list[StepSpec]:
        timeout = float(settings.RACKPILOT_BMC_TIMEOUT_SECONDS)
        return [StepSpec(STEP, "", f"Power {parameters['action']}", timeout=timeout * 6 + 40, stop_on_failure=False)]

    def check_nodes(self, nodes: list, parameters: dict) -> None:
        missing = nodes_without_bmc(nodes)
        if missing:
            raise serializers.ValidationError({"targets": [f"No BMC login for {', '.join(missing)}."]})

    def prepare(self, job, shard) -> None:
        self.logins = logins.shard_logins(shard)
        self.transport = job.transport
        self.action = job.parameters["action"]
        self.seed = getattr(get_simulator(), "seed", settings.RACKPILOT_SIM_SEED)

    def step_runner(self, step: StepSpec):
        timeout = float(settings.RACKPILOT_BMC_TIMEOUT_SECONDS)

        async def act(target: NodeTarget, run) -> CommandResult:
            found = self.logins.get(target.hostname)
            if found is None:
                outcome = PowerOutcome(PollResult.ERROR, f"{target.hostname} has no BMC settings")
            else:
                node_id, login = found
                ipmi, redfish = clients.bmc_link(
                    login, node_id, transport=self.transport, timeout=timeout, seed=self.seed
                )
                outcome = await power(login, action=self.action, ipmi=ipmi, redfish=redfish)
            self.outcomes[target.hostname] = outcome
            ok = outcome.result == PollResult.OK
            stdout, stderr = outcome.transcript.encode(), b"" if ok else (outcome.message + "\n").encode()
            # the transcript is kept as the cell's artifact: what was sent and what the BMC answered
            return CommandResult(
                exit_code=0 if ok else 1,
                stdout=stdout,
                stderr=stderr,
                stdout_size=len(stdout),
                stderr_size=len(stderr),
            )

        return act

    def cell_record(self, target: NodeTarget, step: StepSpec, result: CommandResult) -> CellRecord:
        outcome = self.outcomes.get(target.hostname)
        if outcome is None:  # canceled or timed out before the BMC answered
            return super().cell_record(target, step, result)
        data = {"bmc_result": outcome.result, "power_state": outcome.power_state, "action": self.action}
        return CellRecord(STATUS_OF[outcome.result], outcome.message[:300], data)

    def shard_finished(self, job, shard) -> None:
        # The power each BMC read back is the node's now: the rack page and the health producers read it.
        read = {
            self.logins[host][0]: outcome.power_state for host, outcome in self.outcomes.items() if host in self.logins
        }
        readings.record_power_states(read, at=timezone.now())
        for hostname, outcome in self.outcomes.items():
            if outcome.result == PollResult.OK:
                continue
            emit(job, outcome.message, level=EventLevel.ERROR, hostname=hostname, step=STEP)
            if outcome.result == PollResult.UNREACHABLE and hostname in self.logins:
                node = Node.objects.get(pk=self.logins[hostname][0])
                record_event(
                    component=Component.bmc(node),
                    source=Source.BMC_LOG,
                    kind="bmc_unreachable",
                    severity=Severity.MAJOR,
                    summary=outcome.message[:300],
                    evidence={"job": str(job.public_id), "action": self.action},
                )
