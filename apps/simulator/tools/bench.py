"""Benchmarks and diagnostics: nvbandwidth (copy-engine matrices, local HBM copy) and dcgmi diag (text table)."""

from apps.simulator.model import hbm_copy_tbps, jitter, noise, pcie_gbps, peer_copy_gbps
from apps.simulator.state import SimGpu, cuda_version_code
from apps.simulator.terminal import CommandOutput, Context, fail, ok
from apps.simulator.tools.common import option_value

# --- nvbandwidth ------------------------------------------------------------------------------------------------

NVBANDWIDTH_VERSION = "v0.7"
HOST_TO_DEVICE_SHARE = 1.0
DEVICE_TO_HOST_SHARE = 0.985  # reads from the GPU over PCIe come in a little under writes to it
BIDIRECTIONAL_SHARE = 1.9  # both directions at once: nearly twice one direction (the links are full duplex)

TESTCASES = {
    "host_to_device_memcpy_ce": "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)",
    "device_to_host_memcpy_ce": "memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)",
    "device_to_device_memcpy_read_ce": "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)",
    "device_to_device_memcpy_write_ce": "memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)",
    "device_to_device_bidirectional_memcpy_read_ce": "memcpy CE GPU(row) <-> GPU(column) bandwidth (GB/s)",
    "device_local_copy": "memcpy local GPU(column) bandwidth (GB/s)",
}


def _matrix(rows: list[list[float | None]]) -> list[str]:
    columns = len(rows[0]) if rows else 0
    lines = [" " + "".join(f"{column:>10}" for column in range(columns))]
    for number, row in enumerate(rows):
        cells = "".join(f"{'N/A' if value is None else f'{value:.2f}':>10}" for value in row)
        lines.append(f"{number}{cells}")
    return lines


def _testcase(context: Context, name: str, gpus: list[SimGpu]) -> list[list[float | None]]:
    def value(base: float, *keys) -> float:
        return jitter(noise(context.seed, context.state.hostname, "nvbandwidth", name, *keys), base, 0.003)

    straggler = context.state.straggler
    if name == "host_to_device_memcpy_ce":
        return [[value(pcie_gbps(gpu) * HOST_TO_DEVICE_SHARE, gpu.index) for gpu in gpus]]
    if name == "device_to_host_memcpy_ce":
        return [[value(pcie_gbps(gpu) * DEVICE_TO_HOST_SHARE, gpu.index) for gpu in gpus]]
    if name == "device_local_copy":
        return [[value(hbm_copy_tbps(gpu, straggler) * 1000, gpu.index) for gpu in gpus]]
    return [[None if a is b else value(peer_copy_gbps(a, b), a.index, b.index) for b in gpus] for a in gpus]


def nvbandwidth(context: Context, argv: list[str]) -> CommandOutput:
    selection = option_value(argv[1:], "-t", "--testcase")
    names = list(TESTCASES)
    if selection:
        names = [name.strip() for name in selection.split(",")]
        unknown = [name for name in names if name not in TESTCASES]
        if unknown:
            return fail(1, f"ERROR: Testcase {unknown[0]} not found!\n")
    gpus = context.state.visible_gpus
    lines = [
        f"nvbandwidth Version: {NVBANDWIDTH_VERSION}",
        f"Built from Git version: {NVBANDWIDTH_VERSION}",
        "",
        "NOTE: This tool reports current measured bandwidth on your system.",
        "Additional system-specific tuning may be required to achieve maximal peak bandwidth.",
        "",
        f"CUDA Runtime Version: {cuda_version_code(context.state.cuda_toolkit)}",
        f"CUDA Driver Version: {cuda_version_code(context.state.driver_cuda)}",
        f"Driver Version: {context.state.driver_version}",
        "",
    ]
    lines += [f"Device {index}: {gpu.facts.product_name} ({gpu.pci_bus_id[:-2]})" for index, gpu in enumerate(gpus)]
    lines.append("")
    for name in names:
        lines += [f"Running {name}.", TESTCASES[name]]
        if name.startswith("device_to_device") and len(gpus) < 2:
            lines += ["Waived. ", ""]
            continue
        matrix = _testcase(context, name, gpus)
        total = sum(value for row in matrix for value in row if value is not None)
        lines += _matrix(matrix) + ["", f"SUM {name} {total:.2f}", ""]
    return ok("\n".join(lines) + "\n")


# --- dcgmi diag -------------------------------------------------------------------------------------------------

DCGM_VERSION = "3.3.9"
RULE = "+---------------------------+------------------------------------------------+"
WRAP = 45  # dcgmi cuts long cell text every 45 characters, mid-word
SECTIONS = {
    "Metadata": "|-----  Metadata  ----------+------------------------------------------------|",
    "Deployment": "|-----  Deployment  --------+------------------------------------------------|",
    "Integration": "+-----  Integration  -------+------------------------------------------------+",
    "Hardware": "+-----  Hardware  ----------+------------------------------------------------+",
    "Stress": "+-----  Stress  ------------+------------------------------------------------+",
}


def _row(name: str, value: str) -> str:
    return f"| {name:<26}| {value:<47}|"


def _message_rows(kind: str, message: str) -> list[str]:
    chunks = [message[start : start + WRAP] for start in range(0, len(message), WRAP)]
    return [_row(kind if position == 0 else "", f"{chunk:<45}  ") for position, chunk in enumerate(chunks)]


def _result(failures: list[str]) -> tuple[str, list[str]]:
    """'Pass', or 'Fail - GPU: 1, 3' naming the GPUs the messages blame (each message starts 'GPU N')."""
    if not failures:
        return "Pass", failures
    gpus = sorted({int(message.split()[1]) for message in failures}, key=int)
    return f"Fail - GPU: {', '.join(str(gpu) for gpu in gpus)}", failures


def _deployment(context: Context, gpus: list[SimGpu]) -> list[tuple[str, str, list[str]]]:
    state = context.state
    lost = [
        f"GPU {gpu.index} ({gpu.pci_bus_id}) is lost: it has fallen off the bus. Reboot the node and check "
        "its PCIe slot, riser and power."
        for gpu in state.lost_gpus
    ]
    remap = [
        f"GPU {index} had uncorrectable memory errors and row remapping is pending. Reset the GPU (nvidia-smi -r) "
        "to activate the remapped rows."
        for index, gpu in enumerate(gpus)
        if gpu.remap_pending
    ]
    tests = [("Denylist", [])]
    tests.append(("NVML Library", lost))
    tests += [("CUDA Main Library", []), ("Permissions and OS Blocks", []), ("Persistence Mode", [])]
    tests += [("Environment Variables", []), ("Page Retirement/Row Remap", remap), ("Graphics Processes", [])]
    tests.append(("Inforom", []))
    return [(name, *_result(messages)) for name, messages in tests]


def _longer_tests(context: Context, gpus: list[SimGpu], level: int) -> list[tuple[str, list]]:
    pcie = [
        f"GPU {index} PCIe link is Gen{gpu.link_gen} x{gpu.pcie_width}, below the expected Gen{gpu.pcie_gen_max} x16."
        for index, gpu in enumerate(gpus)
        if gpu.pcie_gen or gpu.pcie_width < 16
    ]
    memory = [f"GPU {index} has uncorrectable ECC errors." for index, gpu in enumerate(gpus) if gpu.ecc_uncorrectable]
    thermal = [
        f"GPU {index} clocks were throttled by HW thermal slowdown at {gpu.thermal_c} C."
        for index, gpu in enumerate(gpus)
        if gpu.thermal_c
    ]
    slow = [
        f"GPU {index} ran below the expected performance: SM clock held at {gpu.clock_cap_mhz} MHz."
        for index, gpu in enumerate(gpus)
        if gpu.clock_cap_mhz
    ]
    sections = [("Integration", [("PCIe", *_result(pcie))]), ("Hardware", [("GPU Memory", *_result(memory))])]
    if level >= 3:
        sections.append(
            (
                "Stress",
                [
                    ("Targeted Stress", *_result(thermal + slow)),
                    ("Targeted Power", *_result(thermal)),
                    ("Memory Bandwidth", *_result(memory)),
                    ("EUD Test", "Skip - All", []),
                ],
            )
        )
    return sections


def dcgmi(context: Context, argv: list[str]) -> CommandOutput:
    if argv[1:2] != ["diag"]:
        return fail(255, "The simulator answers dcgmi diag -r 1|2|3.\n")
    level = option_value(argv[2:], "-r", "--run") or "1"
    names = {"short": "1", "medium": "2", "long": "3"}
    level = names.get(level, level)
    if level not in ("1", "2", "3"):
        return fail(255, f"Error: invalid test run level '{level}'.\n")
    gpus = context.state.visible_gpus
    ids = ",".join(gpu.facts.device_id[:4].lower() for gpu in gpus)
    lines = [
        "Successfully ran diagnostic for group.",
        RULE,
        _row("Diagnostic", "Result"),
        "+===========================+================================================+",
        SECTIONS["Metadata"],
        _row("DCGM Version", DCGM_VERSION),
        _row("Driver Version Detected", context.state.driver_version),
        _row("GPU Device IDs Detected", ids),
        SECTIONS["Deployment"],
    ]
    failed = False
    sections = [("Deployment", _deployment(context, gpus))] + (
        _longer_tests(context, gpus, int(level)) if level != "1" else []
    )
    for position, (section, tests) in enumerate(sections):
        if position:
            lines.append(SECTIONS[section])
        for name, result, messages in tests:
            lines.append(_row(name, result))
            for message in messages:
                lines += _message_rows("Warning", message)
            failed = failed or result.startswith("Fail")
    lines.append(RULE)
    return CommandOutput(1 if failed else 0, "\n".join(lines) + "\n", "")


COMMANDS = {"nvbandwidth": nvbandwidth, "dcgmi": dcgmi}
