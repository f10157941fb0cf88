"""The `discover` job kind: runs the fact commands on every target, then reconciles what they said with the inventory.

Columns of the matrix: one per fact family (gpus, topology, links, bios, cpu, numa, disks), and per data NIC
interface one each for link speed (ethtool), driver/firmware (ethtool -i) and PFC (mlnx_qos). A cell whose tool
is missing, fails or prints something its parser refuses ends `error` with "could not run: ..." — never green.
"""

from rest_framework import serializers

from apps.discovery.choices import FactFamily
from apps.discovery.facts import PER_INTERFACE, read, step_name, summary
from apps.jobs.choices import StepStatus
from apps.jobs.kinds import JobKind, StepSpec, register_kind
from apps.nodeexec.base import CommandResult
from apps.nodeexec.catalogue import CATALOGUE, PLACEHOLDERS, Command, register_command
from apps.parsers.errors import ParseError
from apps.parsers.nvidia_smi import QUERY_GPU_FIELDS

MAX_INTERFACES = 16

# Catalogue commands discovery runs (registered only when another app has not already defined the name).
COMMANDS = (
    Command(
        "nvidia-smi-query-gpu",
        ("nvidia-smi", f"--query-gpu={','.join(QUERY_GPU_FIELDS)}", "--format=csv,noheader,nounits"),
        "Every GPU field Rackpilot reads (UUID, serial, PCI, VBIOS, memory, PCIe, ECC, clocks) as CSV.",
    ),
    Command("nvidia-smi-topo", ("nvidia-smi", "topo", "-m"), "GPU/NIC PCIe and NVLink matrix with NUMA affinity."),
    Command(
        "ethtool",
        ("ethtool", "{interface}"),
        "Link speed and link state of one interface.",
        placeholders=("interface",),
    ),
    Command(
        "ethtool-driver",
        ("ethtool", "-i", "{interface}"),
        "Driver, firmware and PCI address of one interface.",
        placeholders=("interface",),
    ),
    Command(
        "mlnx-qos",
        ("mlnx_qos", "-i", "{interface}"),
        "Trust mode and PFC priorities of a Mellanox interface.",
        placeholders=("interface",),
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

# (family, catalogue command) for the families that run once per node, in column order.
NODE_FAMILIES = (
    (FactFamily.GPUS, "nvidia-smi-query-gpu"),
    (FactFamily.TOPOLOGY, "nvidia-smi-topo"),
    (FactFamily.LINKS, "ip-link"),
    (FactFamily.BIOS, "bios-version"),
    (FactFamily.CPU, "lscpu"),
    (FactFamily.NUMA, "numactl"),
    (FactFamily.DISKS, "lsblk"),
)
INTERFACE_COMMANDS = {
    FactFamily.SPEED: "ethtool",
    FactFamily.NIC_FIRMWARE: "ethtool-driver",
    FactFamily.QOS: "mlnx-qos",
}


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

    def __init__(self):
        self._readings: dict[int, object] = {}

    def steps(self, parameters: dict) -> list[StepSpec]:
        specs = [
            StepSpec(name=step_name(family), command=command, label=FactFamily(family).label, stop_on_failure=False)
            for family, command in NODE_FAMILIES
        ]
        for family in PER_INTERFACE:
            for interface in parameters.get("interfaces") or []:
                specs.append(
                    StepSpec(
                        name=step_name(family, interface),
                        command=INTERFACE_COMMANDS[family],
                        label=f"{FactFamily(family).label} of {interface}",
                        values={"interface": interface},
                        stop_on_failure=False,
                    )
                )
        return specs

    def evaluate(self, step: StepSpec, result: CommandResult) -> str:
        if result.canceled:
            return StepStatus.CANCELED
        if not result.ok:
            return StepStatus.ERROR  # could not run: tool missing, unreachable, timed out, or it failed
        try:
            self._readings[id(result)] = read(step.name, result.stdout.decode("utf-8", errors="replace"))
        except ParseError as error:
            self._readings[id(result)] = error
            return StepStatus.ERROR
        return StepStatus.SUCCEEDED

    def summarize(self, step: StepSpec, result: CommandResult) -> str:
        reading = self._readings.pop(id(result), None)
        if result.canceled:
            return "canceled"
        if not result.ok:
            return ("could not run: " + could_not_run_reason(step, result))[:300]
        if isinstance(reading, ParseError):
            return f"could not run: output not understood ({reading})"[:300]
        return summary(reading)[:300] if reading is not None else ""

    def shard_finished(self, job, shard) -> None:
        from apps.discovery.services import record_shard

        record_shard(job=job, shard=shard)


def could_not_run_reason(step: StepSpec, result: CommandResult) -> str:
    """Why a fact command gave no facts, in words: missing tool, unreachable node, timeout, or its own error."""
    tool = step.argv()[0]
    stderr = result.stderr.decode("utf-8", errors="replace").strip().splitlines()
    if result.timed_out:
        return f"{tool} timed out after {step.timeout_seconds():g} s"
    if result.exit_code == 127 or "command not found" in (stderr[-1] if stderr else ""):
        return f"{tool} is not installed (not found on the node)"
    if result.error:
        return result.error
    if result.signal:
        return f"{tool} was killed by SIG{result.signal}"
    detail = stderr[0] if stderr else result.stdout.decode("utf-8", errors="replace").strip()[:200]
    return f"{tool} exited {result.exit_code}" + (f": {detail}" if detail else "")
