"""nvidia-smi: the summary table, -L, --query-gpu CSV, -q / -q -x (tools/nvsmi_query.py), topo -m, nvlink -s, dmon.

Formats follow the real captures under tests/fixtures/real (driver 580 on an H200 for the single-GPU forms, 8-GPU
HGX captures for topo and nvlink).
"""

from apps.simulator.changes import gpu_key
from apps.simulator.digits import is_whole_number
from apps.simulator.model import REASONS_SUPPORTED_MASK, GpuReading
from apps.simulator.state import DRIVER_VERSION, SimGpu
from apps.simulator.terminal import CommandOutput, Context, fail, ok
from apps.simulator.tools import nvsmi_query
from apps.simulator.tools.common import (
    cpu_ranges,
    ctime,
    lost_gpu_warnings,
    memory_used_mib,
    option_value,
    reading,
    visible_gpus,
)

SIM_TIMESTAMP = "2026/11/30 09:00:00.000"  # --query-gpu=timestamp at the simulated clock
INVALID_ARGS = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n\n"


def nvidia_smi(context: Context, argv: list[str]) -> CommandOutput:
    args = argv[1:]
    if args[:1] == ["topo"]:
        return _with_warnings(context, topo(context, args[1:]))
    if args[:1] == ["nvlink"]:
        return _with_warnings(context, nvlink(context, args[1:]))
    if args[:1] == ["dmon"]:
        return _with_warnings(context, dmon(context, args[1:]))
    gpus = _selected(context, option_value(args, "-i", "--id"))
    if gpus is None:
        return fail(6, "", "No devices were found\n")
    if (watts := option_value(args, "-pl", "--power-limit")) is not None:
        return _with_warnings(context, power_limit(context, gpus, watts))
    if "-r" in args or "--gpu-reset" in args:
        return _with_warnings(context, gpu_reset(context, gpus))
    if "-L" in args or "--list-gpus" in args:
        result = ok("".join(f"GPU {index}: {gpu.facts.product_name} (UUID: {gpu.uuid})\n" for index, gpu in gpus))
    elif query := option_value(args, "--query-gpu"):
        result = query_gpu(context, gpus, query, option_value(args, "--format") or "")
    elif "-q" in args or "--query" in args:
        displays = option_value(args, "-d", "--display")
        xml = "-x" in args or "--xml-format" in args
        result = nvsmi_query.render(context, gpus, displays=displays, xml=xml)
    elif not args:
        result = ok(table(context, gpus))
    else:
        result = CommandOutput(2, INVALID_ARGS, "")
    return _with_warnings(context, result)


def _with_warnings(context: Context, result: CommandOutput) -> CommandOutput:
    warnings = lost_gpu_warnings(context)
    if not warnings:
        return result
    return CommandOutput(result.exit_code, result.stdout, warnings + result.stderr)


def _selected(context: Context, selection: str | None) -> list[tuple[int, SimGpu]] | None:
    gpus = visible_gpus(context)
    if selection is None:
        return gpus
    wanted = {item.strip() for item in selection.split(",")}
    chosen = [(i, gpu) for i, gpu in gpus if str(i) in wanted or gpu.uuid in wanted or gpu.pci_bus_id in wanted]
    return chosen or None


# --- nvidia-smi -pl: set the power limit (root; the driver forgets it at a reboot) --------------------------------


def power_limit(context: Context, gpus: list[tuple[int, SimGpu]], watts: str) -> CommandOutput:
    """`nvidia-smi [-i N] -pl W` as the real tool answers: one line per GPU, then "All done."; a value outside the
    board's range stops it before any GPU changes ("Terminating early due to previous errors.", exit 2)."""
    try:
        value = float(watts)
    except ValueError:
        return CommandOutput(2, INVALID_ARGS, "")
    for _, gpu in gpus:
        low, high = float(gpu.min_power_limit_w), float(gpu.tdp_w)
        if not low <= value <= high:
            return fail(
                2,
                f"Provided power limit {value:.2f} W is not a valid power limit which should be between "
                f"{low:.2f} W and {high:.2f} W for GPU {gpu.pci_bus_id}\nTerminating early due to previous errors.\n",
            )
    lines = []
    for _, gpu in gpus:
        before = float(gpu.power_cap_w)
        context.change(gpu_key(gpu.index, "power_limit"), int(round(value)))
        lines.append(f"Power limit for GPU {gpu.pci_bus_id} was set to {value:.2f} W from {before:.2f} W.\n")
    return ok("".join(lines) + "All done.\n")


# --- nvidia-smi -r: reset a GPU (root; the driver applies pending row remaps as the GPU comes back) -------------


def gpu_reset(context: Context, gpus: list[tuple[int, SimGpu]]) -> CommandOutput:
    """`nvidia-smi -r -i N`: one GPU at a time, as the real tool insists; a GPU fallen off the bus is not found (the
    selection fails before this, "No devices were found")."""
    if len(gpus) != 1:
        return fail(255, "", "GPU Reset couldn't run because GPU ID is not specified.\n")
    _, gpu = gpus[0]
    if gpu.remap_pending:
        context.change(gpu_key(gpu.index, "remap_pending"), False)
    return ok(f"GPU {gpu.pci_bus_id} was successfully reset.\nAll done.\n")


# --- the summary table ------------------------------------------------------------------------------------------

RULE = "+-----------------------------------------------------------------------------------------+"
CELL_RULE = "+-----------------------------------------+------------------------+----------------------+"
HEADER = """\
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
"""
PROCESSES = """\
| Processes:                                                                              |
|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|  No running processes found                                                             |
"""


def table(context: Context, gpus: list[tuple[int, SimGpu]]) -> str:
    driver, cuda = context.state.driver_version, context.state.driver_cuda
    version = f"NVIDIA-SMI {driver}"
    title = f"| {version:<34}Driver Version: {driver:<15}CUDA Version: {cuda:<9}|"
    lines = [f"{ctime()}       ", RULE, title, CELL_RULE, HEADER.rstrip("\n")]
    for index, gpu in gpus:
        now = reading(context, gpu)
        lines += _table_gpu(index, gpu, now, context.load)
        lines.append(CELL_RULE)
    lines += ["", RULE, PROCESSES.rstrip("\n"), RULE]
    return "\n".join(lines) + "\n"


def _table_gpu(index: int, gpu: SimGpu, now: GpuReading, load: float) -> list[str]:
    used = memory_used_mib(gpu, load)
    first = (
        f"{index:>4}  {gpu.facts.product_name:<31}{'On':<4}|{gpu.pci_bus_id:>19} {'Off':>3} "
        f"|{gpu.ecc_uncorrectable:>21} "
    )
    second = (
        f" {'N/A':>3}  {f'{now.temperature_c}C':>4}  {'P0':>4}  {f'{round(now.power_w)}W':>14} / "
        f"{f'{round(now.power_cap_w)}W':>5} |{f'{used}MiB':>11} / {f'{gpu.facts.memory_mib}MiB':>9} |"
        f"{f'{now.util_gpu}%':>8}{'Default':>13} "
    )
    third = f"{'':41}|{'':24}|{'Disabled':>21} "
    return [f"|{first}|", f"|{second}|", f"|{third}|"]


# --- --query-gpu ------------------------------------------------------------------------------------------------

# Spellings nvidia-smi accepts → the name it prints in the CSV header.
PRINTED_NAMES = {
    "gpu_name": "name",
    "gpu_uuid": "uuid",
    "gpu_serial": "serial",
    "gpu_bus_id": "pci.bus_id",
    "clocks.sm": "clocks.current.sm",
    "clocks.mem": "clocks.current.memory",
    "clocks.gr": "clocks.current.graphics",
    "clocks.max.mem": "clocks.max.memory",
    "clocks.max.gr": "clocks.max.graphics",
    "power.draw.average": "power.draw.average",
}


def _printed(name: str) -> str:
    name = PRINTED_NAMES.get(name, name)
    if name.startswith("clocks_throttle_reasons."):
        name = "clocks_event_reasons." + name.split(".", 1)[1]
    return name


# The reasons --query-gpu offers one field each for (clocks_event_reasons.<name>); display_clock_setting has none.
QUERY_REASONS = frozenset(
    {
        "gpu_idle",
        "applications_clocks_setting",
        "sw_power_cap",
        "hw_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
        "sw_thermal_slowdown",
        "sync_boost",
    }
)


def _field_value(
    name: str, index: int, gpu: SimGpu, now: GpuReading, load: float, driver: str = DRIVER_VERSION
) -> tuple[str, str] | None:
    """(unit shown in the header, value with its unit) for one field, or None when nvidia-smi does not know it."""
    facts = gpu.facts
    used = memory_used_mib(gpu, load)
    free = facts.memory_mib - facts.reserved_mib - used + 1
    plain = {
        "index": str(index),
        "count": str(index + 1),
        "uuid": gpu.uuid,
        "name": facts.product_name,
        "serial": gpu.serial,
        "pci.bus_id": gpu.pci_bus_id,
        "pci.bus": f"0x{gpu.bus}",
        "pci.domain": "0x0000",
        "pci.device_id": f"0x{facts.device_id}",
        "driver_version": driver,
        "vbios_version": gpu.vbios,
        "temperature.gpu": str(now.temperature_c),
        "temperature.memory": str(now.memory_temperature_c),
        "pcie.link.gen.current": str(gpu.link_gen),
        "pcie.link.gen.gpucurrent": str(gpu.link_gen),
        "pcie.link.gen.max": str(gpu.pcie_gen_max),
        "pcie.link.gen.gpumax": str(gpu.pcie_gen_max),
        "pcie.link.width.current": str(gpu.pcie_width),
        "pcie.link.width.max": "16",
        "ecc.errors.corrected.volatile.total": "0",
        "ecc.errors.uncorrected.volatile.total": str(gpu.ecc_uncorrectable),
        "ecc.errors.corrected.aggregate.total": "0",
        "ecc.errors.uncorrected.aggregate.total": str(gpu.ecc_uncorrectable),
        "ecc.mode.current": "Enabled",
        "ecc.mode.pending": "Enabled",
        "retired_pages.pending": "[N/A]",
        "remapped_rows.correctable": "0",
        "remapped_rows.uncorrectable": str(min(gpu.ecc_uncorrectable, 1) if gpu.remap_pending else 0),
        "remapped_rows.pending": "Yes" if gpu.remap_pending else "No",
        "remapped_rows.failure": "No",
        "persistence_mode": "Enabled",
        "compute_mode": "Default",
        "mig.mode.current": "Disabled",
        "mig.mode.pending": "Disabled",
        "pstate": "P0",
        "clocks_event_reasons.active": f"0x{now.reasons_mask:016x}",
        "clocks_event_reasons.supported": f"0x{REASONS_SUPPORTED_MASK:016x}",
        "timestamp": SIM_TIMESTAMP,
    }
    if name in plain:
        return "", plain[name]
    units = {
        "memory.total": ("MiB", facts.memory_mib),
        "memory.reserved": ("MiB", facts.reserved_mib),
        "memory.used": ("MiB", used),
        "memory.free": ("MiB", free),
        "utilization.gpu": ("%", now.util_gpu),
        "utilization.memory": ("%", now.util_mem),
        "power.draw": ("W", f"{now.power_avg_w:.2f}"),
        "power.draw.average": ("W", f"{now.power_avg_w:.2f}"),
        "power.draw.instant": ("W", f"{now.power_w:.2f}"),
        "power.limit": ("W", f"{now.power_cap_w:.2f}"),
        "enforced.power.limit": ("W", f"{now.power_cap_w:.2f}"),
        "power.default_limit": ("W", f"{gpu.tdp_w:.2f}"),
        "power.min_limit": ("W", f"{gpu.min_power_limit_w:.2f}"),
        "power.max_limit": ("W", f"{gpu.tdp_w:.2f}"),
        "clocks.current.sm": ("MHz", now.sm_mhz),
        "clocks.current.graphics": ("MHz", now.sm_mhz),
        "clocks.current.memory": ("MHz", now.mem_mhz),
        "clocks.max.sm": ("MHz", facts.max_sm_mhz),
        "clocks.max.graphics": ("MHz", facts.max_sm_mhz),
        "clocks.max.memory": ("MHz", facts.memory_mhz),
        "fan.speed": ("%", "[N/A]"),  # SXM boards have no fan of their own
    }
    if name in units:
        unit, value = units[name]
        return unit, value if value == "[N/A]" else f"{value} {unit}"
    prefix, _, reason = name.partition(".")
    if prefix == "clocks_event_reasons" and reason in QUERY_REASONS:
        return "", "Active" if reason in now.reasons else "Not Active"
    return None


def query_gpu(context: Context, gpus: list[tuple[int, SimGpu]], query: str, fmt: str) -> CommandOutput:
    options = {part.strip() for part in fmt.split(",")}
    if "csv" not in options:
        return CommandOutput(2, "Format must be specified as csv. Please run 'nvidia-smi -h' for help.\n\n", "")
    names = [_printed(name.strip()) for name in query.split(",") if name.strip()]
    rows, header = [], []
    for position, (index, gpu) in enumerate(gpus):
        now = reading(context, gpu)
        cells = []
        for requested, name in zip(query.split(","), names, strict=False):
            value = _field_value(name, index, gpu, now, context.load, context.state.driver_version)
            if value is None:
                return CommandOutput(2, f'Field "{requested.strip()}" is not a valid field to query.\n\n', "")
            unit, text = value
            if position == 0:
                header.append(f"{name} [{unit}]" if unit else name)
            cells.append(text.rsplit(" ", 1)[0] if unit and "nounits" in options else text)
        rows.append(", ".join(cells))
    lines = rows if "noheader" in options else [", ".join(header), *rows]
    return ok("".join(line + "\n" for line in lines))


# --- topo -m ----------------------------------------------------------------------------------------------------

LEGEND = """\
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def topo(context: Context, args: list[str]) -> CommandOutput:
    if args[:1] not in (["-m"], ["--matrix"]):
        return CommandOutput(2, INVALID_ARGS, "")
    state = context.state
    gpus = visible_gpus(context)
    nics = state.rdma_nics
    devices = [(f"GPU{i}", gpu) for i, gpu in gpus] + [(f"NIC{k}", nic) for k, nic in enumerate(nics)]
    names = [name for name, _ in devices]
    lines = ["\t\x1b[4m" + "\t".join([*names, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]) + "\x1b[0m"]
    for name, device in devices:
        cells = [" X " if other is device else _link(device, other) for _, other in devices]
        if isinstance(device, SimGpu):
            cpus = cpu_ranges(state.numa_cpus(device.numa_node))
            affinity, gpu_numa = _numa_affinity(state, device)
            cells += [cpus, affinity, "", gpu_numa]
        lines.append("\t".join([name, *cells]))
    lines += ["", LEGEND.rstrip("\n")]
    if nics:
        lines += ["", "NIC Legend:", ""] + [f"  NIC{k}: {nic.rdma_device}" for k, nic in enumerate(nics)]
    return ok("\n".join(lines) + "\n")


def _gpu_numa_id(state, gpu: SimGpu) -> int:
    """The first NUMA node of a Grace-attached GPU's memory: after the CPUs' nodes, each GPU's block in index order
    (2, 10, 18, 26 on a GB200 tray)."""
    position = sorted(other.index for other in state.gpus).index(gpu.index)
    return state.numa_nodes + position * gpu.facts.memory_numa_nodes


def _numa_affinity(state, gpu: SimGpu) -> tuple[str, str]:
    """NUMA Affinity and GPU NUMA ID as topo -m prints them: on a Grace-attached GPU the CPU's node and the memory
    nodes of the GPUs on that CPU, less each GPU's first ("0,3-9,11-17"), and the GPU's first node; else the CPU's
    node and N/A."""
    if not gpu.facts.memory_numa_nodes:
        return str(gpu.numa_node), "N/A"
    nodes = [gpu.numa_node]
    for other in state.gpus:
        if other.numa_node == gpu.numa_node:
            first = _gpu_numa_id(state, other)
            nodes += range(first + 1, first + other.facts.memory_numa_nodes)
    return cpu_ranges(nodes), str(_gpu_numa_id(state, gpu))


def _pci_domain(device) -> int:
    address = device.pci_bus_id if isinstance(device, SimGpu) else device.pci_address
    return int(address.split(":")[0], 16) if address.count(":") == 2 else 0


def _link(a, b) -> str:
    if isinstance(a, SimGpu) and isinstance(b, SimGpu) and a.facts.nvlinks:
        return f"NV{min(a.active_nvlinks, b.active_nvlinks)}"
    if _pci_domain(a) != _pci_domain(b):
        return "SYS"  # each device of a Grace tray has its own PCI segment: between them, through the SoC
    if a.pcie_switch and a.pcie_switch == b.pcie_switch:
        return "PIX"
    return "NODE" if a.numa_node == b.numa_node else "SYS"


# --- nvlink -s --------------------------------------------------------------------------------------------------


def nvlink(context: Context, args: list[str]) -> CommandOutput:
    if not args or args[0] not in ("-s", "--status"):
        return CommandOutput(2, INVALID_ARGS, "")
    lines = []
    for index, gpu in _selected(context, option_value(args, "-i", "--id")) or []:
        if not gpu.facts.nvlinks:
            continue
        lines.append(f"GPU {index}: {gpu.facts.product_name} (UUID: {gpu.uuid})")
        for link in range(gpu.facts.nvlinks):
            state = "<inactive>" if link in gpu.nvlinks_down else f"{gpu.facts.nvlink_link_gb_per_s:.3f} GB/s"
            lines.append(f"         Link {link}: {state}")
    return ok("".join(line + "\n" for line in lines))


# --- dmon -------------------------------------------------------------------------------------------------------

DMON_GROUPS = {
    "p": [("pwr", "W"), ("gtemp", "C"), ("mtemp", "C")],
    "u": [("sm", "%"), ("mem", "%"), ("enc", "%"), ("dec", "%"), ("jpg", "%"), ("ofa", "%")],
    "c": [("mclk", "MHz"), ("pclk", "MHz")],
    "v": [("pviol", "%"), ("tviol", "bool")],
    "m": [("fb", "MB"), ("bar1", "MB"), ("ccpm", "MB")],
    "e": [("sbecc", "errs"), ("dbecc", "errs"), ("pci", "errs")],
    "t": [("rxpci", "MB/s"), ("txpci", "MB/s")],
}
DMON_ORDER = "pucvmet"


def dmon(context: Context, args: list[str]) -> CommandOutput:
    count = option_value(args, "-c", "--count") or "1"
    groups = option_value(args, "-s", "--select") or "puc"
    if not is_whole_number(count) or any(letter not in DMON_GROUPS for letter in groups):
        return CommandOutput(2, INVALID_ARGS, "")
    columns = [column for letter in DMON_ORDER if letter in groups for column in DMON_GROUPS[letter]]
    lines = [
        "# gpu" + "".join(f" {name:>6}" for name, _ in columns) + " ",
        "# Idx" + "".join(f" {unit:>6}" for _, unit in columns) + " ",
    ]
    gpus = _selected(context, option_value(args, "-i", "--id")) or []
    for sample in range(int(count)):
        for index, gpu in gpus:
            values = _dmon_values(context, gpu, sample)
            lines.append(f"{index:>5}" + "".join(f" {values[name]:>6}" for name, _ in columns) + " ")
    return ok("".join(line + "\n" for line in lines))


def _dmon_values(context: Context, gpu: SimGpu, sample: int) -> dict[str, str]:
    now = reading(context, gpu, sample)
    loaded = context.load > 0
    # The power-cap violation counter needs one sampling interval before it reads 100%.
    pviol = 100 if now.power_capped and sample > 0 else 0
    values = {
        "pwr": round(now.power_w),
        "gtemp": now.temperature_c,
        "mtemp": now.memory_temperature_c,
        "sm": now.util_gpu,
        "mem": now.util_mem,
        "enc": 0,
        "dec": 0,
        "jpg": 0,
        "ofa": 0,
        "mclk": now.mem_mhz,
        "pclk": now.sm_mhz,
        "pviol": pviol,
        "tviol": 1 if gpu.thermal_c else 0,
        "fb": memory_used_mib(gpu, context.load),
        "bar1": 1012 if loaded else 1,
        "ccpm": 0,
        "sbecc": 0,
        "dbecc": gpu.ecc_uncorrectable,
        "pci": 0,
        "rxpci": 14 if loaded else 0,
        "txpci": 7 if loaded else 0,
    }
    return {name: str(value) for name, value in values.items()}


COMMANDS = {"nvidia-smi": nvidia_smi}
