"""HPL-MxP (NVIDIA HPC-Benchmarks' hpl-mxp.sh), launched by mpirun across simulated nodes, in the format of the real
run in tests/fixtures/real/hpl-mxp: the settings block, device info, component timings, the progress lines, the
refinement residuals and the `HPL MxP Result` block with GFLOPS (to report) and LU GFLOPS, ANSI colours included.

The figures come from apps.simulator.model.hpl_mxp_times: every GPU's GEMM rate (SMs x clock x efficiency, lower
under a power cap, capped clocks or thermal slowdown), the panels' broadcast over NVLink or the nodes' NICs, and HBM
for the refinement. A GPU fallen off the bus leaves a rank without a device: the job aborts as Open MPI reports it.
"""

from datetime import timedelta

from apps.simulator.digits import is_whole_number
from apps.simulator.model import (
    HPL_MXP_REFINE_ITERATIONS,
    compute_facts,
    hpl_mxp_times,
    jitter,
    node_network_gb_per_s,
    noise,
    nvlink_gb_per_s,
)
from apps.simulator.state import SimGpu, SimulatedNode
from apps.simulator.terminal import CommandOutput
from apps.simulator.tools.common import SIM_NOW

BINARIES = {"hpl-mxp.sh", "xhpl_mxp"}
VERSION = "25.9.0"
RED, BLUE, OFF = "\x1b[0;31m", "\x1b[34m", "\x1b[0m"
RULE = "-" * 93


class HplUsage(ValueError):
    pass


def parse_args(argv: list[str]) -> dict:
    """--n N --nb NB --nprow P --npcol Q [--nporder row|column] [--gpu-affinity 0:1:...] [--sloppy-type 1|2]."""
    options = {"n": None, "nb": 1024, "nprow": 1, "npcol": 1, "order": "row", "sloppy": "FP16"}
    names = {"--n": "n", "--nb": "nb", "--nprow": "nprow", "--npcol": "npcol"}
    position = 0
    while position < len(argv):
        word = argv[position]
        value = argv[position + 1] if position + 1 < len(argv) else None
        if value is None:
            raise HplUsage(f"missing value for {word}")
        if word in names:
            if not is_whole_number(value) or int(value) < 1:
                raise HplUsage(f"invalid value for {word}: {value}")
            options[names[word]] = int(value)
        elif word == "--nporder":
            options["order"] = value
        elif word == "--sloppy-type":
            options["sloppy"] = {"1": "FP8", "2": "FP16"}.get(value, value)
        elif word not in ("--gpu-affinity", "--cpu-affinity", "--mem-affinity", "--test-loop"):
            raise HplUsage(f"unknown option {word}")
        position += 2
    if options["n"] is None:
        raise HplUsage("--n is required")
    return options


def _seconds_line(name: str, value: float, host: str) -> str:
    return f"{name} seconds: AVG = {value:.2f}, MAX = {value:.2f} (0->{host}), MIN = {value:.2f} (0->{host})"


def _stamp(seconds: float) -> str:
    moment = SIM_NOW + timedelta(seconds=seconds)
    return f"{moment:%Y-%m-%d %H:%M:%S}.{moment.microsecond // 1000:03d}"


def _settings(options: dict, preset: int) -> list[str]:
    return [
        "",
        "=" * 80,
        f"HPL-MxP-NVIDIA {VERSION}  -- NVIDIA accelerated HPL-MxP benchmark benchmark -- NVIDIA",
        "=" * 80,
        "",
        " ****** HPL MxP Settings ****** ",
        "",
        f"   --nprow =  {options['nprow']} ",
        f"   --npcol =  {options['npcol']} ",
        f"   --order = {options['order']} ",
        f"   --n     = {options['n']} ",
        f"   --nb    = {options['nb']} ",
        "   --tolerance                        = 1.000000e-12 ",
        "   --test-loop                        = 1 ",
        f"   --preset-gemm-kernel               = {preset} ",
        f"   --sloppy-type                      = {options['sloppy']} ",
        "",
        "",
        "",
        " ****** Monitor GPU Settings ****** ",
        "",
        "   --monitor-gpu                      = 0 ",
        "",
        "",
        "",
        " ****** test 1 of 1 starts ****** ",
        "",
        f"   n      = {options['n']}",
        f"   nb     = {options['nb']}",
        f"   nprow  = {options['nprow']}",
        f"   npcol  = {options['npcol']}",
        "",
    ]


def _device_info(gpu: SimGpu, memory_gb: float) -> list[str]:
    compute = compute_facts(gpu)
    sm = "90" if gpu.architecture == "Hopper" else "80"
    return [
        "Device info:",
        f"\tPeak clock frequency {compute.max_sm_mhz} MHz",
        f"\tSM {sm}",
        f"\tNumber of SMs {compute.sms}",
        f"\tTotal memory available {memory_gb:.2f} GB",
        "",
    ]


def run_hpl_mxp(
    states: list[SimulatedNode], per_node: int, program: list[str], *, seed: int, launcher: str
) -> CommandOutput:
    """rank 0's report of one HPL-MxP solve over `per_node` GPUs of each of `states`."""
    try:
        options = parse_args(program[1:])
    except HplUsage as error:
        return CommandOutput(1, "", f"HPL-MxP: {error}\n")
    ranks = per_node * len(states)
    if options["nprow"] * options["npcol"] != ranks:
        return CommandOutput(
            1, "", f"HPL-MxP: nprow x npcol = {options['nprow'] * options['npcol']} but {ranks} processes\n"
        )
    first = states[0]
    gpus = [gpu for state in states for gpu in state.visible_gpus[:per_node]]
    memory_gb = first.visible_gpus[0].facts.memory_mib * 1.048576 / 1024 if first.visible_gpus else 0.0
    preset = 90 if first.visible_gpus and first.visible_gpus[0].architecture == "Hopper" else 80
    lines = _settings(options, preset)
    short = next((state for state in states if len(state.visible_gpus) < per_node), None)
    if short is not None:
        rank = states.index(short) * per_node + len(short.visible_gpus)
        lines.append(f"[{short.hostname}] rank {rank}: CUDA error: invalid device ordinal (cudaSetDevice)")
        stderr = (
            f"mpirun noticed that process rank {rank} with PID 0 on node {short.hostname} exited on signal 6 "
            "(Aborted).\n"
        )
        return CommandOutput(134, "\n".join(lines) + "\n", stderr)
    n, nb = options["n"], options["nb"]
    link = min(node_network_gb_per_s(state) for state in states) if len(states) > 1 else min(map(nvlink_gb_per_s, gpus))
    times = hpl_mxp_times(n, nb, gpus, link)
    rng = noise(seed, launcher, "hpl-mxp", n, nb, ranks)
    lu_s = jitter(rng, times.lu_s, 0.005)
    solver_s = jitter(rng, times.solver_s, 0.005)
    gflops, lu_gflops = times.flops / (lu_s + solver_s) / 1e9, times.flops / lu_s / 1e9
    host = first.hostname
    lines += _device_info(gpus[0], memory_gb)
    used = 10 * n * n / ranks / 1e9  # FP64 matrix and its FP16 copy
    lines += [
        RULE,
        f"{BLUE} Per process device memory consumption MAX = {used:.3f} GB, available MIN = "
        f"{max(memory_gb - used, 0):.3f} GB{OFF}",
        RULE,
        "",
        _seconds_line("Constructor", 0.14, host),
        "",
        "",
        " ****** Testing HPL MxP components ****** ",
        "",
        _seconds_line("GEMM", 0.04, host),
        "",
        f"GEMM GFLOPS: AVG = {lu_gflops / ranks * 2.1:.2f}, MAX = {lu_gflops / ranks * 2.1:.2f} (0->{host}), "
        f"MIN = {lu_gflops / ranks * 2.1:.2f} (0->{host})",
        "",
        "",
        " ****** Matrix Generation ****** ",
        "",
        _seconds_line("matgen", 1.41, host),
        "",
        "",
        " ****** test loop 1 of 1 starts ****** ",
        "",
        _stamp(0),
    ]
    for step in range(1, 11):  # the factorisation's progress, a tenth at a time
        share = step / 10
        done = 1 - (1 - share) ** 3  # work left falls with the cube of the trailing matrix
        lines.append(
            f"{RED} Prog= {100 * done:6.2f}% N_left= {int(n * (1 - share)):8d} Time= {lu_s * share:8.2f} "
            f"Time_left= {lu_s * (1 - share):10.2f} iTF= {lu_gflops / 1e3:10.2f} TF= {lu_gflops / 1e3:8.2f} "
            f"iTF_per= {lu_gflops / 1e3 / ranks:8.2f} TF_per= {lu_gflops / 1e3 / ranks:8.2f}{OFF}"
        )
    residual = 4.7e-4
    lines += [_stamp(lu_s), _seconds_line("LU", lu_s, host), ""]
    for iteration in range(HPL_MXP_REFINE_ITERATIONS):
        lines.append(f"Solver iteration {iteration:2d}, L-infinite residual = {residual:.8e}")
        residual *= 2.3e-6
    scaled = residual * 1.6e11
    lines += [
        _seconds_line("Iterative Solver", solver_s, host),
        "",
        _stamp(lu_s + solver_s),
        "",
        " ****** HPL MxP Result    ****** ",
        "",
        "    EPS           . . . . . . . . . . . . . . . . .          =    2.000000E-16",
        "    Threshold     . . . . . . . . . . . . . . . . .          =    1.600000E+01",
        f"  ||Ax-b||_oo     . . . . . . . . . . . . . . . . .          =    {residual:.6E}",
        f"  ||A   ||_oo     . . . . . . . . . . . . . . . . .          =    {n * 1.0256:.6E}",
        f"  ||x   ||_oo     . . . . . . . . . . . . . . . . .          =    {2.03 / n:.6E}",
        "  ||b   ||_oo     . . . . . . . . . . . . . . . . .          =    9.999712E-01",
        f"  ||Ax-b||_oo / (EPS * (||A||_oo * ||x||_oo + ||b||_oo) * N) =    {scaled:.6E} ...... PASSED",
        "",
        f"    N = {n}, NB = {nb}, NPROW = {options['nprow']}, NPCOL = {options['npcol']}, "
        f"SLOPPY-TYPE = {options['sloppy']}",
        f"{RED}       GFLOPS = {gflops:.4e}, per GPU = {gflops / ranks:10.2f}{OFF}"
        f"{BLUE} ------ The HPL-MxP performance to report{OFF}",
        f"    LU GFLOPS = {lu_gflops:.4e}, per GPU = {lu_gflops / ranks:10.2f}"
        f"{BLUE} ------ The performance excluding the iterative solver part{OFF}",
        "",
        " ****** HPL MxP Result    ****** ",
        "",
        "",
        " ****** test loop 1 of 1 done   ****** ",
        "",
        "",
        " ****** test 1 of 1 done   ****** ",
        "",
    ]
    return CommandOutput(0, "\n".join(lines) + "\n", "", seconds=0.0)
