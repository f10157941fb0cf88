"""Classic HPL (NVIDIA HPC-Benchmarks' hpl.sh --dat FILE, netlib HPL's input and output formats), launched by
mpirun across simulated nodes: HPL.dat is read from the launcher's files, and rank 0 prints HPL.out as netlib HPL 2.3
does (the banner, the parameters, the `T/V N NB P Q Time Gflops` row, the scaled residual check PASSED or FAILED,
the summary, `End of Tests.`), as in tests/fixtures/real/hpl.

The time comes from apps.simulator.model.hpl_seconds: every GPU's tensor-core DGEMM rate at its loaded clock (lower
under a power cap, capped clocks or thermal slowdown), each panel's step and broadcast (NVLink in a node, the nodes'
NICs across them). A GPU with uncorrectable ECC errors corrupts the solution: the residual check fails."""

import re

from apps.simulator.model import hpl_seconds, jitter, node_network_gb_per_s, noise, nvlink_gb_per_s
from apps.simulator.state import SimulatedNode
from apps.simulator.terminal import CommandOutput

BINARIES = {"hpl.sh", "xhpl"}
RULE = "=" * 80
DASHES = "-" * 80
BANNER = [
    RULE,
    "HPLinpack 2.3  --  High-Performance Linpack benchmark  --   December 2, 2018",
    "Written by A. Petitet and R. Clint Whaley,  Innovative Computing Laboratory, UTK",
    "Modified by Piotr Luszczek, Innovative Computing Laboratory, UTK",
    "Modified by Julien Langou, University of Colorado Denver",
    RULE,
    "",
    "An explanation of the input/output parameters follows:",
    "T/V    : Wall time / encoded variant.",
    "N      : The order of the coefficient matrix A.",
    "NB     : The partitioning blocking factor.",
    "P      : The number of process rows.",
    "Q      : The number of process columns.",
    "Time   : Time in seconds to solve the linear system.",
    "Gflops : Rate of execution for solving the linear system.",
    "",
    "The following parameter values will be used:",
    "",
]
DAT_FIELDS = {5: "n", 7: "nb", 10: "p", 11: "q"}  # the lines of HPL.dat (0-based) holding one problem and one grid


class HplUsage(ValueError):
    pass


def read_dat(text: str) -> dict:
    """N, NB, P and Q of an HPL.dat with one problem size, one block and one grid (what the catalogue writes)."""
    lines = text.splitlines()
    values = {}
    for index, name in DAT_FIELDS.items():
        word = lines[index].split()[0] if index < len(lines) and lines[index].split() else ""
        if not re.fullmatch(r"[1-9]\d*", word):
            raise HplUsage(f"HPL.dat line {index + 1}: expected a positive number for {name.upper()}")
        values[name] = int(word)
    return values


def dat_path(program: list[str]) -> str:
    if len(program) != 3 or program[1] != "--dat":
        raise HplUsage("usage: hpl.sh --dat <path to HPL.dat>")
    return program[2]


def run_hpl(states: list[SimulatedNode], per_node: int, dat: dict, *, seed: int, launcher: str) -> CommandOutput:
    """Rank 0's HPL.out of one solve over `per_node` GPUs of each of `states`."""
    n, nb, p, q = dat["n"], dat["nb"], dat["p"], dat["q"]
    ranks = per_node * len(states)
    head = BANNER + [
        f"N      : {n:8d} ",
        f"NB     : {nb:8d} ",
        "PMAP   : Row-major process mapping",
        f"P      : {p:8d} ",
        f"Q      : {q:8d} ",
        "PFACT  :    Left ",
        "NBMIN  :       2 ",
        "NDIV   :       2 ",
        "RFACT  :    Left ",
        "BCAST  :  2ringM ",
        "DEPTH  :       1 ",
        "SWAP   : Spread-roll (long)",
        "L1     : no-transposed form",
        "U      : transposed form",
        "EQUIL  : yes",
        "ALIGN  : 8 double precision words",
        "",
        DASHES,
        "",
        "- The matrix A is randomly generated for each test.",
        "- The following scaled residual check will be computed:",
        "      ||Ax-b||_oo / ( eps * ( || x ||_oo * || A ||_oo + || b ||_oo ) * N )",
        "- The relative machine precision (eps) is taken to be               1.110223e-16",
        "- Computational tests pass if scaled residuals are less than                16.0",
        "",
    ]
    if p * q != ranks:
        return CommandOutput(1, "\n".join(head) + "\n", f"HPL ERROR: P x Q = {p * q} but {ranks} processes\n")
    gpus = [gpu for state in states for gpu in state.visible_gpus[:per_node]]
    short = next((state for state in states if len(state.visible_gpus) < per_node), None)
    if short is not None:
        rank = states.index(short) * per_node + len(short.visible_gpus)
        stderr = (
            f"[{short.hostname}] rank {rank}: CUDA error: invalid device ordinal (cudaSetDevice)\n"
            f"mpirun noticed that process rank {rank} with PID 0 on node {short.hostname} exited on signal 6 "
            "(Aborted).\n"
        )
        return CommandOutput(134, "\n".join(head) + "\n", stderr)
    link = min(node_network_gb_per_s(state) for state in states) if len(states) > 1 else min(map(nvlink_gb_per_s, gpus))
    rng = noise(seed, launcher, "hpl", n, nb, ranks)
    seconds = jitter(rng, hpl_seconds(n, nb, gpus, link), 0.005)
    gflops = (2 / 3 * n**3 + 3 / 2 * n**2) / seconds / 1e9
    corrupted = any(gpu.ecc_uncorrectable for gpu in gpus)
    residual = rng.uniform(1e3, 1e5) if corrupted else rng.uniform(2e-4, 9e-4)
    check = "FAILED" if residual >= 16.0 else "PASSED"
    lines = head + [
        RULE,
        "T/V                N    NB     P     Q               Time                 Gflops",
        DASHES,
        f"{'WR11L2L2':<10}{n:>10}{nb:>6}{p:>6}{q:>6}{seconds:>19.2f}{gflops:>23.4e}",
        "HPL_pdgesv() start time Mon Nov 30 09:00:00 2026",
        "",
        "HPL_pdgesv() end time   Mon Nov 30 09:00:00 2026",
        "",
        DASHES,
        f"||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)= {residual:16.8e} ...... {check}",
        RULE,
        "",
        "Finished      1 tests with the following results:",
        f"              {int(check == 'PASSED')} tests completed and passed residual checks,",
        f"              {int(check == 'FAILED')} tests completed and failed residual checks,",
        "              0 tests skipped because of illegal input values.",
        DASHES,
        "",
        "End of Tests.",
        RULE,
    ]
    return CommandOutput(0, "\n".join(lines) + "\n", "")
