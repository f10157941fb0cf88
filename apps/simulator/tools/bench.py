"""Benchmarks and diagnostics: nvbandwidth (copy-engine matrices, local HBM copy), dcgmi diag (text table), and the
burn-in soak (gpu_burn with nvidia-smi sampling the GPUs while it runs)."""

from datetime import timedelta

from apps.nodeexec.catalogue import SOAK_SAMPLES_MARK
from apps.simulator.model import (
    gemm_tflops,
    hbm_copy_tb_per_s,
    jitter,
    noise,
    pcie_gb_per_s,
    peer_copy_gb_per_s,
    soak_reading,
)
from apps.simulator.state import SimGpu, cuda_version_code
from apps.simulator.terminal import CommandOutput, Context, fail, ok
from apps.simulator.tools.common import SIM_NOW, option_value

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
        return [[value(pcie_gb_per_s(gpu) * HOST_TO_DEVICE_SHARE, gpu.index) for gpu in gpus]]
    if name == "device_to_host_memcpy_ce":
        return [[value(pcie_gb_per_s(gpu) * DEVICE_TO_HOST_SHARE, gpu.index) for gpu in gpus]]
    if name == "device_local_copy":
        return [[value(hbm_copy_tb_per_s(gpu, straggler) * 1000, gpu.index) for gpu in gpus]]
    return [[None if a is b else value(peer_copy_gb_per_s(a, b), a.index, b.index) for b in gpus] for a in gpus]


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
# How long each long level keeps the GPUs under load (DCGM's guide: level 3 up to ~30 min, level 4 1–2 h).
DIAG_LOAD_SECONDS = {3: 1200, 4: 3600}
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
        f"GPU {index} clocks were throttled by HW thermal slowdown at {gpu.thermal_c or gpu.late_thermal_c} C."
        for index, gpu in enumerate(gpus)
        if gpu.thermal_c
        or (gpu.late_thermal_after_s is not None and gpu.late_thermal_after_s <= DIAG_LOAD_SECONDS.get(level, 0))
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
        return fail(255, "The simulator answers dcgmi diag -r 1|2|3|4.\n")
    level = option_value(argv[2:], "-r", "--run") or "1"
    names = {"short": "1", "medium": "2", "long": "3", "xlong": "4"}
    level = names.get(level, level)
    if level not in ("1", "2", "3", "4"):
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


# --- burn-in soak: gpu_burn, sampled by nvidia-smi -lms -----------------------------------------------------------

BURN_REPORTS = 10  # gpu_burn prints its progress line about every tenth of the run
BURN_MATRIX_BYTES = 268435456  # "Results are 268435456 bytes each"


def _burn_line(context: Context, gpus: list[SimGpu], elapsed: float, duration: int) -> str:
    processed, rates, errors, temperatures = [], [], [], []
    for gpu in gpus:
        rng = noise(context.seed, context.state.hostname, "gpu_burn", gpu.index, int(elapsed))
        now = soak_reading(gpu, elapsed, rng)
        hot = now.sm_mhz <= 990 and bool(gpu.thermal_c or gpu.late_thermal_c)
        gflops = jitter(rng, gemm_tflops(gpu, fp32=True, hot=hot) * 1000, 0.005)
        processed.append(int(gflops * elapsed / 17.2))  # one SGEMM of 8192 x 8192 is ~1.1 TFLOP; ~16 per result
        rates.append(f"{processed[-1]} ({gflops:.0f} Gflop/s)")
        errors.append("-524288000  (WARNING!)" if gpu.ecc_uncorrectable else "0")
        temperatures.append(f"{now.temperature_c} C")
    return (
        f"{100 * elapsed / duration:.1f}%  proc'd: {' - '.join(rates)}   errors: {' - '.join(errors)}   "
        f"temps: {' - '.join(temperatures)}"
    )


def gpu_burn_output(context: Context, duration: int) -> str:
    gpus = context.state.visible_gpus
    lines = [f"Burning for {duration} seconds."]
    lines += [f"GPU {index}: {gpu.facts.product_name} (UUID: {gpu.uuid})" for index, gpu in enumerate(gpus)]
    for index, gpu in enumerate(gpus):
        total = gpu.facts.memory_mib
        available = total - gpu.facts.reserved_mib - 300
        lines.append(
            f"Initialized device {index} with {total} MB of memory ({available} MB available, using "
            f"{int(available * 0.9)} MB of it), using FLOATS"
        )
    iterations = int(gpus[0].facts.memory_mib * 0.9 / 256) if gpus else 0
    lines.append(f"Results are {BURN_MATRIX_BYTES} bytes each, thus performing {iterations} iterations")
    for report in range(1, BURN_REPORTS + 1):
        elapsed = duration * report / BURN_REPORTS
        lines.append(_burn_line(context, gpus, elapsed, duration))
        if report < BURN_REPORTS:
            moment = SIM_NOW + timedelta(seconds=elapsed)
            lines += [f"\tSummary at:   {moment:%a %b %d %I:%M:%S %p} UTC {moment:%Y}", ""]
    lines += ["Killing processes.. done", "", f"Tested {len(gpus)} GPUs:"]
    lines += [f"\tGPU {index}: {'FAULTY' if gpu.ecc_uncorrectable else 'OK'}" for index, gpu in enumerate(gpus)]
    return "\n".join(lines) + "\n"


def soak_samples(context: Context, duration: int, interval_ms: int) -> str:
    """nvidia-smi --query-gpu=SOAK_FIELDS --format=csv,nounits -lms INTERVAL, for the length of the soak."""
    # The header as nvidia-smi prints SOAK_FIELDS (clocks.sm under its printed name, units kept with nounits).
    header = "timestamp, index, temperature.gpu, clocks.current.sm [MHz], power.draw [W], clocks_event_reasons.active"
    lines = [header]
    step = interval_ms / 1000
    for sample in range(int(duration / step) + 1):
        elapsed = sample * step
        moment = SIM_NOW + timedelta(seconds=elapsed)
        stamp = f"{moment:%Y/%m/%d %H:%M:%S}.{moment.microsecond // 1000:03d}"
        for index, gpu in enumerate(context.state.visible_gpus):
            now = soak_reading(gpu, elapsed, noise(context.seed, context.state.hostname, "soak", gpu.index, sample))
            lines.append(
                f"{stamp}, {index}, {now.temperature_c}, {now.sm_mhz}, {now.power_avg_w:.2f}, 0x{now.reasons_mask:016x}"
            )
    return "\n".join(lines) + "\n"


def dcgm_soak(context: Context, level: str, interval_ms: str) -> CommandOutput:
    """sh -c DCGM_SOAK_SCRIPT: dcgmi diag's table, the marker, then the samples taken while its stress tests ran."""
    if not context.state.visible_gpus:
        return fail(1, "No CUDA devices\n")
    diag = dcgmi(context, ["dcgmi", "diag", "-r", level])
    samples = soak_samples(context, DIAG_LOAD_SECONDS.get(int(level), 0), max(int(interval_ms), 1))
    return CommandOutput(diag.exit_code, f"{diag.stdout}{SOAK_SAMPLES_MARK}\n{samples}", diag.stderr)


def soak(context: Context, duration: str, interval_ms: str) -> CommandOutput:
    """sh -c SOAK_SCRIPT: gpu_burn's output, the marker, then the samples nvidia-smi took while it ran."""
    if not context.state.visible_gpus:
        return fail(1, "No CUDA devices\n")
    seconds, interval = int(duration), max(int(interval_ms), 1)
    burn = gpu_burn_output(context, seconds)
    status = 1 if any(gpu.ecc_uncorrectable for gpu in context.state.visible_gpus) else 0
    return CommandOutput(status, f"{burn}{SOAK_SAMPLES_MARK}\n{soak_samples(context, seconds, interval)}", "")


COMMANDS = {"nvbandwidth": nvbandwidth, "dcgmi": dcgmi}
