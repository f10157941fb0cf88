"""The `discover` job kind: runs the fact commands on every target, then reconciles what they said with the inventory.

Columns of the matrix: one per fact family (gpus, topology, links, nics, bios, cpu, numa, disks). The nics column
is one command per node that reads link speed (ethtool), driver/firmware (ethtool -i) and PFC (mlnx_qos) of every
data NIC asked for. A cell whose tool is missing, fails or prints something its parser refuses ends `error` with
"could not run: ..." — never green; what the other tools of a nics cell read is still recorded.
"""

from rest_framework import serializers

from apps.discovery.choices import FactFamily
from apps.discovery.facts import read, step_name, summary, tool_failure
from apps.jobs.choices import StepStatus
from apps.jobs.kinds import CellRecord, JobKind, StepSpec, register_kind
from apps.nodeexec.base import CommandResult, NodeTarget
from apps.nodeexec.catalogue import (
    CATALOGUE,
    MAX_INTERFACES,
    NIC_FACTS_SCRIPT,
    PLACEHOLDERS,
    Command,
    register_command,
)
from apps.parsers.errors import ParseError
from apps.parsers.nvidia_smi import QUERY_GPU_FIELDS

# Catalogue commands discovery runs (registered only when another app has not already defined the name).
COMMANDS = (
    Command(
        "nvidia-smi-query-gpu",
        ("nvidia-smi", f"--query-gpu={','.join(QUERY_GPU_FIELDS)}", "--format=csv,noheader,nounits"),
        "Every GPU field Rackpilot reads (UUID, serial, PCI, VBIOS, memory, PCIe, ECC, clocks) as CSV.",
    ),
    Command("nvidia-smi-topo", ("nvidia-smi", "topo", "-m"), "GPU/NIC PCIe and NVLink matrix with NUMA affinity."),
    Command(
        "nic-facts",
        ("sh", "-c", NIC_FACTS_SCRIPT, "sh", "{interfaces}"),
        "Link speed (ethtool), driver and firmware (ethtool -i) and PFC (mlnx_qos) of each listed interface.",
        placeholders=("interfaces",),
    ),
    Command("bios-version", ("cat", "/sys/class/dmi/id/bios_version"), "The BIOS version."),
    Command("numactl", ("numactl", "-H"), "NUMA nodes, their CPUs and memory."),
    Command(
        "lsblk",
        ("lsblk", "-J", "-b", "-o", "NAME,SIZE,TYPE,MODEL,ROTA,TRAN,MOUNTPOINT"),
        "Block devices as JSON, sizes in bytes.",
    ),
)
for _command in COMMANDS:
    if _command.name not in CATALOGUE:
        register_command(_command)

# (family, catalogue command) in column order; the nics column runs only when there are interfaces to read.
FAMILIES = (
    (FactFamily.GPUS, "nvidia-smi-query-gpu"),
    (FactFamily.TOPOLOGY, "nvidia-smi-topo"),
    (FactFamily.LINKS, "ip-link"),
    (FactFamily.NICS, "nic-facts"),
    (FactFamily.BIOS, "bios-version"),
    (FactFamily.CPU, "lscpu"),
    (FactFamily.NUMA, "numactl"),
    (FactFamily.DISKS, "lsblk"),
)


def default_interfaces() -> list[str]:
    """Data NIC names in the inventory (callers that know the targets pass theirs: services.data_interfaces)."""
    from apps.discovery.services import data_interfaces

    return data_interfaces(nodes=None)


class DiscoverParameters(serializers.Serializer):
    interfaces = serializers.ListField(
        child=serializers.RegexField(
            rf"^(?:{PLACEHOLDERS['interface'].pattern})\Z",
            error_messages={"invalid": "Enter a Linux interface name (letters, digits, . _ - : @; up to 15)."},
        ),
        default=default_interfaces,
        max_length=MAX_INTERFACES,
        allow_empty=True,
        help_text="Data NIC interfaces to read speed, firmware and PFC of (default: the inventory's data NIC names).",
    )

    def validate_interfaces(self, value):
        if len(set(value)) != len(value):
            raise serializers.ValidationError("An interface is listed twice.")
        return sorted(value)


@register_kind
class Discover(JobKind):
    name = "discover"
    label = "Discover"
    description = (
        "Reads GPUs, NICs, firmware, CPU/NUMA/memory, disks and GPU-NIC affinity from each node and records where "
        "they differ from the inventory (an operator accepts or dismisses each difference)."
    )
    parameters = DiscoverParameters
    transports = ("ssh", "local", "sim")
    rerun_on_worker_loss = True  # reads the nodes; its findings are recorded by shard_finished of the run that ends

    def steps(self, parameters: dict) -> list[StepSpec]:
        interfaces = parameters.get("interfaces") or []
        specs = []
        for family, command in FAMILIES:
            values = {}
            if family == FactFamily.NICS:
                if not interfaces:
                    continue
                values = {"interfaces": ",".join(interfaces)}
            label = FactFamily(family).label
            specs.append(StepSpec(step_name(family), command, label, values=values, stop_on_failure=False))
        return specs

    def cell_record(self, target: NodeTarget, step: StepSpec, result: CommandResult) -> CellRecord:
        if result.canceled:
            return CellRecord(StepStatus.CANCELED, "canceled")
        if not result.ok:  # could not run: tool missing, unreachable, timed out, or it failed
            return CellRecord(StepStatus.ERROR, ("could not run: " + could_not_run_reason(step, result))[:300])
        try:
            reading = read(step.name, result.stdout.decode("utf-8", errors="replace"))
        except ParseError as error:
            return CellRecord(StepStatus.ERROR, f"could not run: output not understood ({error})"[:300])
        # Part of the nics column could not run (a tool missing on some interface): not green, facts still kept.
        status = StepStatus.ERROR if reading.facts.get("could_not_run") else StepStatus.SUCCEEDED
        return CellRecord(status, summary(reading)[:300])

    def shard_finished(self, job, shard) -> None:
        from apps.discovery.services import record_shard

        record_shard(job=job, shard=shard)


def could_not_run_reason(step: StepSpec, result: CommandResult) -> str:
    """Why a fact command gave no facts, in words: missing tool, unreachable node, timeout, or its own error."""
    tool = step.argv()[0]
    if result.timed_out:
        return f"{tool} timed out after {step.timeout_seconds():g} s"
    if result.error and result.exit_code != 127:  # 127: the transport could not find the tool to start it
        return result.error
    if result.signal:
        return f"{tool} was killed by SIG{result.signal}"
    stderr = result.stderr.decode("utf-8", errors="replace")
    return tool_failure(tool, result.exit_code, stderr or result.stdout.decode("utf-8", errors="replace")[:200])
