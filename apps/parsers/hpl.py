"""HPL (netlib HPL and NVIDIA's HPL) and HPL-MxP job output, including runs that hung, were killed or never ended."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .common import Result, require_content, strip_ansi, to_float, to_int, unexpected

# Lines a scheduler or MPI launcher prints when it ends a job early.
TERMINATION = re.compile(
    r"BAD TERMINATION|CANCELLED AT|DUE TO TIME LIMIT|Sending Ctrl-C|exited on signal|mpirun noticed|"
    r"srun: error|slurmstepd\S*: error|Segmentation fault|core dumped|\bKilled\b|Aborted \(",
    re.IGNORECASE,
)
# Further lines worth showing next to a failed run.
ERROR_LINE = re.compile(r"\berror\b|FAILED to|Unknow(?:n)? exit status|EXIT STRING", re.IGNORECASE)
NOISE = re.compile(r"UCX\s+WARN")

RESIDUAL = re.compile(r"\|\|Ax-b\|\|_oo.*=\s*([-+\d.eE]+)\s*\.{3,}\s*(PASSED|FAILED)")


def _job_errors(lines: list[str]) -> tuple[list[str], bool]:
    """Error lines worth keeping, and whether the job was ended from outside (killed, cancelled, Ctrl-C)."""
    errors: list[str] = []
    terminated = False
    for line in lines:
        stripped = line.strip().strip("=").strip()
        if not stripped or NOISE.search(stripped) or RESIDUAL.search(stripped):
            continue
        if TERMINATION.search(stripped):
            terminated = True
        elif not ERROR_LINE.search(stripped):
            continue
        if stripped not in errors:
            errors.append(stripped)
    return errors, terminated


# --- HPL --------------------------------------------------------------------------------------------------------


@dataclass
class HplResult(Result):
    variant: str  # the T/V code, e.g. WR00L2L2
    n: int
    nb: int
    p: int
    q: int
    time_s: float | None
    gflops: float | None
    residual: float | None = None
    residual_check: str | None = None  # PASSED | FAILED | None when the check never printed


@dataclass
class HplRun(Result):
    program: str | None
    status: str  # passed | failed | interrupted | incomplete
    results: list[HplResult]
    tests_passed: int | None = None
    tests_failed: int | None = None
    tests_skipped: int | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def best_gflops(self) -> float | None:
        values = [result.gflops for result in self.results if result.gflops is not None]
        return max(values) if values else None

    def to_dict(self) -> dict:
        data = super().to_dict()
        data["best_gflops"] = self.best_gflops
        return data


HPL_PROGRAM = re.compile(r"^(HPL-NVIDIA \S+|HPLinpack \S+|HPL-AI \S+)")
HPL_HEADER = re.compile(r"^T/V\s+N\s+NB\s+P\s+Q\s+Time\s+Gflops")
HPL_RESULT = re.compile(r"^([A-Z][A-Z0-9]*)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([-+\d.eE]+)\s+([-+\d.eE]+)")
HPL_SUMMARY = re.compile(r"^(\d+) tests? (completed and passed|completed and failed|skipped)")


def parse_hpl(text: str) -> HplRun:
    """HPL / HPL-NVIDIA output (HPL.out or the job's stdout); ANSI colour codes are ignored."""
    lines = [strip_ansi(line) for line in require_content(text, "HPL output")]
    program = next((m[1] for line in lines if (m := HPL_PROGRAM.match(line.strip()))), None)
    results: list[HplResult] = []
    summary: dict[str, int] = {}
    ended = False
    after_header = False
    for line in lines:
        stripped = line.strip()
        if HPL_HEADER.match(stripped):
            after_header = True
        elif after_header and (match := HPL_RESULT.match(stripped)):
            results.append(_hpl_result(match))
            after_header = False
        elif (match := RESIDUAL.search(stripped)) and results:
            results[-1].residual, results[-1].residual_check = to_float(match[1]), match[2]
        elif match := HPL_SUMMARY.match(stripped):
            summary[match[2]] = int(match[1])
        elif stripped.startswith("End of Tests"):
            ended = True
    if program is None and not results:
        raise unexpected(lines, "HPL output (the 'HPLinpack' banner or a 'T/V  N  NB  P  Q  Time  Gflops' table)")
    errors, terminated = _job_errors(lines)
    return HplRun(
        program=program,
        status=_hpl_status(results, ended, terminated),
        results=results,
        tests_passed=summary.get("completed and passed"),
        tests_failed=summary.get("completed and failed"),
        tests_skipped=summary.get("skipped"),
        errors=errors,
    )


def _hpl_result(match: re.Match) -> HplResult:
    return HplResult(
        variant=match[1],
        n=int(match[2]),
        nb=int(match[3]),
        p=int(match[4]),
        q=int(match[5]),
        time_s=to_float(match[6]),
        gflops=to_float(match[7]),
    )


def _hpl_status(results: list[HplResult], ended: bool, terminated: bool) -> str:
    if any(result.residual_check == "FAILED" for result in results):
        return "failed"
    if terminated:
        return "interrupted"
    if ended and results:
        return "passed"
    return "incomplete"


# --- HPL-MxP ----------------------------------------------------------------------------------------------------


@dataclass
class HplMxpRun(Result):
    program: str | None
    status: str  # passed | failed | interrupted | incomplete
    n: int | None = None
    nb: int | None = None
    nprow: int | None = None
    npcol: int | None = None
    sloppy_type: str | None = None
    gflops: float | None = None
    gflops_per_gpu: float | None = None
    lu_gflops: float | None = None
    lu_gflops_per_gpu: float | None = None
    residual: float | None = None
    residual_check: str | None = None
    solver_residuals: list[float] = field(default_factory=list)
    progress_pct: float | None = None
    errors: list[str] = field(default_factory=list)


MXP_PROGRAM = re.compile(r"^(HPL-MxP-NVIDIA \S+|HPL-MxP \S+|HPL-AI-NVIDIA \S+)")
MXP_SETTING = re.compile(r"^--(n|nb|nprow|npcol|sloppy-type)\s*=\s*(\S+)")
MXP_GFLOPS = re.compile(r"^(LU )?GFLOPS = ([-+\d.eE]+), per GPU =\s*([-+\d.eE]+)")
MXP_SOLVER = re.compile(r"^Solver iteration\s+\d+, L-infinite residual = ([-+\d.eE]+)")
MXP_PROGRESS = re.compile(r"^Prog=\s*([\d.]+)%")
MXP_TEST_DONE = re.compile(r"\*+ test \d+ of \d+ done")


def parse_hpl_mxp(text: str) -> HplMxpRun:
    """HPL-MxP (NVIDIA HPC-Benchmarks) stdout or stderr. Output of a job killed before any result is a result with
    status 'interrupted'; text with neither HPL-MxP nor scheduler lines is a ParseError."""
    lines = [strip_ansi(line) for line in require_content(text, "HPL-MxP output")]
    run = HplMxpRun(program=None, status="incomplete")
    done = False
    for line in lines:
        stripped = line.strip()
        done = _read_mxp_line(run, stripped) or done
    run.errors, terminated = _job_errors(lines)
    classic = any(HPL_PROGRAM.match(line.strip()) for line in lines)
    if run.program is None and run.n is None and (classic or not terminated):
        raise unexpected(lines, "HPL-MxP output (the 'HPL-MxP' banner, its settings, or a scheduler's end-of-job line)")
    run.status = _mxp_status(run, done, terminated)
    return run


def _read_mxp_line(run: HplMxpRun, line: str) -> bool:
    """Read one line into ``run``; True when the line says the test finished."""
    if run.program is None and (match := MXP_PROGRAM.match(line)):
        run.program = match[1]
    elif match := MXP_SETTING.match(line):
        _set_mxp_setting(run, match[1], match[2])
    elif match := MXP_GFLOPS.match(line):
        if match[1]:
            run.lu_gflops, run.lu_gflops_per_gpu = to_float(match[2]), to_float(match[3])
        else:
            run.gflops, run.gflops_per_gpu = to_float(match[2]), to_float(match[3])
    elif match := RESIDUAL.search(line):
        run.residual, run.residual_check = to_float(match[1]), match[2]
    elif match := MXP_SOLVER.match(line):
        run.solver_residuals.append(float(match[1]))
    elif match := MXP_PROGRESS.match(line):
        run.progress_pct = float(match[1])
    return bool(MXP_TEST_DONE.search(line))


def _set_mxp_setting(run: HplMxpRun, name: str, value: str) -> None:
    if name == "sloppy-type":
        run.sloppy_type = value
    else:
        setattr(run, name, to_int(value))


def _mxp_status(run: HplMxpRun, done: bool, terminated: bool) -> str:
    if run.residual_check == "FAILED":
        return "failed"
    if run.residual_check == "PASSED" and run.gflops is not None:
        return "passed"
    if terminated:
        return "interrupted"
    return "incomplete" if not done else "failed"
