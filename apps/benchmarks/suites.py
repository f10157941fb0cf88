"""The per-node suites' commands and the figures read from their output: HPL-MxP (per node, then across the set),
nvbandwidth (every test case), and the burn-in soak (gpu_burn sampled by nvidia-smi).

No Django here (the kind's `cell_record` runs on the fan-out's event loop): commands come from the catalogue, output
is read by apps.parsers, the same parsers as the real captures in tests/fixtures/real.
"""

import math
from dataclasses import dataclass, field
from datetime import datetime

from apps.benchmarks.choices import (
    DCGM_LEVELS,
    DCGM_NOMINAL_SECONDS,
    SOAK_MAX_SAMPLES,
    SOAK_MIN_INTERVAL_MS,
    BurnLoad,
    Suite,
    Verdict,
)
from apps.nodeexec.catalogue import CATALOGUE, SOAK_SAMPLES_MARK
from apps.parsers.dcgm import parse_dcgm_diag
from apps.parsers.errors import ParseError
from apps.parsers.gpu_burn import parse_gpu_burn
from apps.parsers.hpl import parse_hpl, parse_hpl_mxp
from apps.parsers.nvbandwidth import parse_nvbandwidth
from apps.parsers.nvidia_smi import parse_query_gpu

# The nvbandwidth test cases a run asks for: host<->device over PCIe, device<->device over NVLink, local HBM.
NVBANDWIDTH_CASES = (
    "host_to_device_memcpy_ce",
    "device_to_host_memcpy_ce",
    "device_to_device_memcpy_read_ce",
    "device_to_device_memcpy_write_ce",
    "device_to_device_bidirectional_memcpy_read_ce",
    "device_local_copy",
)
# The figures each suite records, with their units (a cell that printed nothing records each as could-not-run).
CASES = {
    Suite.HPL_MXP: (("lu_gflops_per_gpu", "GFLOPS"), ("gflops_per_gpu", "GFLOPS")),
    Suite.HPL: (("hpl_gflops_per_gpu", "GFLOPS"),),
    Suite.NVBANDWIDTH: tuple((case, "GB/s") for case in NVBANDWIDTH_CASES),
    Suite.BURN_IN: (("sustained_sm_clock_mhz", "MHz"), ("gpu_burn_gflops", "Gflop/s")),
}
HPL_MEMORY_SHARE = 0.8  # of the GPUs' memory the matrix may take
# HPL-MxP holds the FP64 matrix and its FP16 copy (10 bytes an element); classic HPL the FP64 matrix alone.
HPL_BYTES_PER_ELEMENT = {Suite.HPL_MXP: 10, Suite.HPL: 8}
THERMAL_REASONS = ("hw_thermal_slowdown", "sw_thermal_slowdown")
SOAK_WARMUP_S = 10.0  # samples before gpu_burn has loaded the GPUs are not judged
EPOCH = datetime(1970, 1, 1)
SOAK_SERIES_POINTS = 360  # per GPU, kept on the row (the artifact keeps every sample)


@dataclass
class Figure:
    """One figure a cell measured, before it is judged: `floor` is the best verdict the output allows (a FAULTY GPU
    fails the soak whatever its clock)."""

    case: str
    unit: str
    value: float | None
    series: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    floor: str = Verdict.PASS


# --- commands ----------------------------------------------------------------------------------------------------


def hpl_n(*, gpus: int, memory_gib: float, nb: int, suite: str = Suite.HPL_MXP) -> int:
    """The largest order (a multiple of nb) whose matrix fits in HPL_MEMORY_SHARE of the GPUs' memory."""
    elements = HPL_MEMORY_SHARE * gpus * memory_gib * 2**30 / HPL_BYTES_PER_ELEMENT[suite]
    return max(nb, int(math.sqrt(elements)) // nb * nb)


def process_grid(ranks: int) -> tuple[int, int]:
    """P x Q = ranks with P the largest factor not above sqrt(ranks) (HPL's advice: nearly square, P <= Q)."""
    p = max(factor for factor in range(1, int(math.isqrt(ranks)) + 1) if ranks % factor == 0)
    return p, ranks // p


def hpl_mxp_argv(parameters: dict, hosts: list[str], n: int) -> list[str]:
    gpus = parameters["gpus_per_node"]
    p, q = process_grid(gpus * len(hosts))
    return CATALOGUE["mpirun-hpl-mxp"].build(
        mpi_np=gpus * len(hosts),
        mpi_hosts=",".join(f"{host}:{gpus}" for host in hosts),
        hpl_n=n,
        hpl_nb=parameters["hpl_nb"],
        hpl_p=p,
        hpl_q=q,
        gpu_affinity=":".join(str(gpu) for gpu in range(gpus)),
    )


def hpl_argv(parameters: dict, hosts: list[str], n: int) -> list[str]:
    """Classic HPL: the catalogue script writes HPL.dat (this order, block and grid) and runs hpl.sh --dat on it."""
    gpus = parameters["gpus_per_node"]
    p, q = process_grid(gpus * len(hosts))
    return CATALOGUE["hpl-classic"].build(
        hpl_n=n,
        hpl_nb=parameters["hpl_nb"],
        hpl_p=p,
        hpl_q=q,
        mpi_np=gpus * len(hosts),
        mpi_hosts=",".join(f"{host}:{gpus}" for host in hosts),
    )


def nvbandwidth_argv(parameters: dict) -> list[str]:
    return CATALOGUE["nvbandwidth-cases"].build(nvbandwidth_cases=",".join(parameters["cases"]))


def soak_interval_ms(duration_s: int) -> int:
    return max(SOAK_MIN_INTERVAL_MS, math.ceil(duration_s * 1000 / SOAK_MAX_SAMPLES))


def soak_argv(parameters: dict) -> list[str]:
    load = parameters.get("burn_load") or BurnLoad.GPU_BURN
    if load in DCGM_LEVELS:
        level = DCGM_LEVELS[load]
        interval = soak_interval_ms(DCGM_NOMINAL_SECONDS[level])
        return CATALOGUE["dcgm-soak"].build(dcgm_level=level, interval_ms=interval)
    duration = parameters["duration_seconds"]
    return CATALOGUE["burn-in-soak"].build(number=duration, interval_ms=soak_interval_ms(duration))


# --- figures -----------------------------------------------------------------------------------------------------


def figures(
    suite: str, stdout: str, stderr: str = "", *, gpus_expected: int = 0, burn_load: str = BurnLoad.GPU_BURN
) -> list[Figure]:
    """The figures of one cell's output; ParseError when the output is not the tool's."""
    if suite == Suite.HPL_MXP:
        return hpl_mxp_figures(stdout + ("\n" + stderr if stderr else ""))
    if suite == Suite.HPL:
        return hpl_figures(stdout + ("\n" + stderr if stderr else ""))
    if suite == Suite.NVBANDWIDTH:
        return nvbandwidth_figures(stdout)
    if suite == Suite.BURN_IN and burn_load in DCGM_LEVELS:
        return dcgm_soak_figures(stdout)
    if suite == Suite.BURN_IN:
        return soak_figures(stdout, gpus_expected=gpus_expected)
    raise ValueError(f"{suite} is not a per-node suite")


def hpl_mxp_figures(text: str) -> list[Figure]:
    run = parse_hpl_mxp(text)
    notes = [f"HPL-MxP {run.status}"] + run.errors[:5]
    settings = {"n": run.n, "nb": run.nb, "nprow": run.nprow, "npcol": run.npcol, "sloppy_type": run.sloppy_type}
    series = {
        **settings,
        "gflops": run.gflops,
        "lu_gflops": run.lu_gflops,
        "residual": run.residual,
        "residual_check": run.residual_check,
        "solver_residuals": run.solver_residuals,
    }
    passed = run.status == "passed"
    floor = Verdict.PASS if passed else Verdict.FAIL
    return [
        Figure("lu_gflops_per_gpu", "GFLOPS", run.lu_gflops_per_gpu if passed else None, series, notes, floor),
        Figure("gflops_per_gpu", "GFLOPS", run.gflops_per_gpu if passed else None, series, notes, floor),
    ]


def hpl_figures(text: str) -> list[Figure]:
    """HPL.out's Gflops per GPU (the run's P x Q processes, one per GPU); none when the residual check failed (the
    solution is wrong, whatever its speed) or the run did not finish."""
    run = parse_hpl(text)
    result = run.results[-1] if run.results else None
    notes = [f"HPL {run.status}"] + run.errors[:5]
    series = {}
    value = None
    if result is not None:
        series = {
            "variant": result.variant,
            "n": result.n,
            "nb": result.nb,
            "p": result.p,
            "q": result.q,
            "time_s": result.time_s,
            "gflops": result.gflops,
            "residual": result.residual,
            "residual_check": result.residual_check,
        }
        if result.residual_check == "FAILED":
            notes.append(f"residual check FAILED ({result.residual:g} ≥ 16): the solution is wrong")
        elif run.status == "passed" and result.gflops is not None:
            value = result.gflops / (result.p * result.q)
    return [Figure("hpl_gflops_per_gpu", "GFLOPS", value, series, notes, Verdict.PASS if value else Verdict.FAIL)]


def nvbandwidth_figures(text: str) -> list[Figure]:
    """One figure per test case: its worst cell (the slowest GPU or GPU pair), with the whole matrix."""
    report = parse_nvbandwidth(text)
    result = []
    for case in report.testcases:
        cells = [
            (value, row, column)
            for row, values in enumerate(case.matrix)
            for column, value in enumerate(values)
            if value is not None
        ]
        worst = min(cells) if cells else None
        notes = [f"{case.description or case.name}: {case.status}"]
        if worst is not None:
            notes.append(f"slowest cell: row {worst[1]}, column {worst[2]} at {worst[0]:g} {case.unit or 'GB/s'}")
        series = {"matrix": case.matrix, "rows": case.rows, "columns": case.columns, "sum": case.sum}
        if case.status == "waived":
            continue
        result.append(Figure(case.name, case.unit or "GB/s", worst[0] if worst else None, series, notes))
    return result


def split_soak(stdout: str) -> tuple[str, str]:
    """gpu_burn's output and the samples after the marker."""
    burn, marker, samples = stdout.partition(SOAK_SAMPLES_MARK + "\n")
    return burn, samples if marker else ""


def soak_figures(stdout: str, *, gpus_expected: int = 0) -> list[Figure]:
    """The SM clock each GPU sustained under load (the lowest loaded sample: a slowdown after ten minutes shows),
    thermal slowdown with when it began, gpu_burn's verdicts and its Gflop/s."""
    burn_text, samples_text = split_soak(stdout)
    burn = parse_gpu_burn(burn_text)
    notes, floor = [f"gpu_burn {burn.status}"], Verdict.PASS
    faulty = [gpu.index for gpu in burn.gpus if gpu.verdict == "FAULTY"]
    if faulty:
        notes.append(f"gpu_burn found compare errors on GPU {', '.join(map(str, faulty))} (FAULTY)")
        floor = Verdict.FAIL
    tested = burn.tested if burn.tested is not None else len(burn.gpus)
    if gpus_expected and tested < gpus_expected:
        notes.append(f"gpu_burn tested {tested} of the {gpus_expected} GPUs the inventory lists")
        floor = Verdict.FAIL
    notes += burn.errors[:5]
    per_gpu, first_throttle = _soak_series(samples_text)
    if first_throttle:
        gpu, seconds, reasons = first_throttle
        notes.append(f"GPU {gpu}: {', '.join(reasons)} from {seconds:g} s into the soak")
        floor = Verdict.FAIL
    loaded = [min(clocks) for clocks in (entry["loaded_sm_mhz"] for entry in per_gpu.values()) if clocks]
    clock = min(loaded) if loaded else None
    if clock is None:
        notes.append("no loaded sample from nvidia-smi")
    series = {
        "gpus": {
            str(index): {key: value for key, value in entry.items() if key != "loaded_sm_mhz"}
            for index, entry in per_gpu.items()
        },
        "duration_s": burn.duration_s,
        "verdicts": {str(gpu.index): gpu.verdict for gpu in burn.gpus},
    }
    gflops = [gpu.gflops for gpu in burn.gpus if gpu.gflops is not None]
    burn_series = {
        "gflops": {str(gpu.index): gpu.gflops for gpu in burn.gpus},
        "temperatures": {str(gpu.index): gpu.temperature_c for gpu in burn.gpus},
    }
    return [
        Figure("sustained_sm_clock_mhz", "MHz", clock, series, notes, floor),
        Figure(
            "gpu_burn_gflops",
            "Gflop/s",
            min(gflops) if gflops and burn.status != "incomplete" else None,
            burn_series,
            notes,
            floor,
        ),
    ]


def dcgm_soak_figures(stdout: str) -> list[Figure]:
    """dcgmi diag's verdicts (a failed test fails the soak, its messages the notes) and the sampled clocks."""
    diag_text, samples_text = split_soak(stdout)
    diag = parse_dcgm_diag(diag_text)
    notes, floor = [f"dcgmi diag {diag.status}"], Verdict.PASS
    for report in diag.runs:
        for test in report.tests:
            if test.status == "fail":
                notes.append(f"{test.name}: fail ({'; '.join(test.messages[:3]) or test.gpus or ''})")
                floor = Verdict.FAIL
    per_gpu, first_throttle = _soak_series(samples_text)
    if first_throttle:
        gpu, seconds, reasons = first_throttle
        notes.append(f"GPU {gpu}: {', '.join(reasons)} from {seconds:g} s into the soak")
        floor = Verdict.FAIL
    loaded = [min(entry["loaded_sm_mhz"]) for entry in per_gpu.values() if entry["loaded_sm_mhz"]]
    series = {
        "gpus": {
            str(index): {key: value for key, value in entry.items() if key != "loaded_sm_mhz"}
            for index, entry in per_gpu.items()
        },
        "diag": [{"name": test.name, "status": test.status} for report in diag.runs for test in report.tests],
    }
    if not loaded:
        notes.append("no loaded sample from nvidia-smi")
    return [Figure("sustained_sm_clock_mhz", "MHz", min(loaded) if loaded else None, series, notes, floor)]


def _soak_series(text: str) -> tuple[dict, tuple | None]:
    """Per GPU: seconds, temperature, SM clock, power and reasons at each sample (thinned), its loaded clocks, and
    the first sample with a thermal slowdown reason (gpu, seconds, reasons)."""
    if not text.strip():
        return {}, None
    try:
        report = parse_query_gpu(text)
    except ParseError:
        return {}, None
    stamps = sorted({gpu.timestamp for gpu in report.gpus if gpu.timestamp})
    start = _seconds(stamps[0]) if stamps else 0.0
    per_gpu: dict[int, dict] = {}
    first = None
    for gpu in report.gpus:
        seconds = round(_seconds(gpu.timestamp) - start, 3) if gpu.timestamp else 0.0
        entry = per_gpu.setdefault(
            gpu.index, {"t": [], "temperature_c": [], "sm_mhz": [], "power_w": [], "reasons": [], "loaded_sm_mhz": []}
        )
        reasons = gpu.clocks_event_reasons or []
        for key, value in (
            ("t", seconds),
            ("temperature_c", gpu.temperature_c),
            ("sm_mhz", gpu.clocks_sm_mhz),
            ("power_w", gpu.power_draw_w),
            ("reasons", reasons),
        ):
            entry[key].append(value)
        if seconds >= SOAK_WARMUP_S and "gpu_idle" not in reasons and gpu.clocks_sm_mhz is not None:
            entry["loaded_sm_mhz"].append(gpu.clocks_sm_mhz)
        thermal = [reason for reason in reasons if reason in THERMAL_REASONS]
        if thermal and (first is None or seconds < first[1]):
            first = (gpu.index, seconds, thermal)
    for entry in per_gpu.values():
        step = max(1, math.ceil(len(entry["t"]) / SOAK_SERIES_POINTS))
        for key in ("t", "temperature_c", "sm_mhz", "power_w", "reasons"):
            entry[key] = _thin(entry[key], step, keep_low=key == "sm_mhz")
    return per_gpu, first


def _thin(values: list, step: int, *, keep_low: bool) -> list:
    """Every step-th value; for clocks the lowest of each stretch, so a dip survives the thinning."""
    if step == 1:
        return values
    chunks = [values[start : start + step] for start in range(0, len(values), step)]
    if keep_low:
        return [min((value for value in chunk if value is not None), default=None) for chunk in chunks]
    return [chunk[0] for chunk in chunks]


def _seconds(stamp: str) -> float:
    """'2026/11/30 09:10:00.000' (nvidia-smi's timestamp) as seconds since the epoch, for differences."""
    try:
        moment = datetime.strptime(stamp.strip(), "%Y/%m/%d %H:%M:%S.%f")
    except ValueError:
        return 0.0
    return (moment - EPOCH).total_seconds()
