"""gpu-burn (wilicc/gpu-burn): progress lines, the per-GPU OK/FAULTY verdicts, and CUDA errors."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .common import Result, require_content, unexpected

PROGRESS = re.compile(r"^([\d.]+)%\s+proc'd:(?P<proc>.*?)\s+errors:(?P<errors>.*?)\s+temps:(?P<temps>.*)$")
PROC_ENTRY = re.compile(r"(\d+) \(([\d.]+) Gflop/s\)")
ERROR_ENTRY = re.compile(r"(-?\d+)\s*(\(WARNING!\))?")
TEMPERATURE = re.compile(r"(-?\d+) C")
VERDICT = re.compile(r"^GPU (\d+): (OK|FAULTY)\s*$")
GPU_TITLE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (\S+)\)\s*$")
TESTED = re.compile(r"^Tested (\d+) GPUs?:")
BURNING = re.compile(r"^Burning for (\d+) seconds")
INITIALISED = re.compile(r"^Initialized device (\d+) with (\d+) MB of memory.*using (\w+)$")
ERROR_TEXT = re.compile(r"Couldn't|Error|error|Failure|failed")


@dataclass
class BurnGpu(Result):
    index: int
    name: str | None = None
    uuid: str | None = None
    verdict: str | None = None  # OK | FAULTY; None when the run ended before the verdicts
    gflops: float | None = None
    errors: int | None = None  # compare errors at the last progress line
    temperature_c: float | None = None
    memory_mb: int | None = None


@dataclass
class GpuBurnRun(Result):
    status: str  # passed | faulty | failed | incomplete
    gpus: list[BurnGpu]
    duration_s: int | None = None
    precision: str | None = None
    progress_pct: float | None = None
    tested: int | None = None
    errors: list[str] = field(default_factory=list)


def parse_gpu_burn(text: str) -> GpuBurnRun:
    lines = require_content(text, "gpu_burn output")
    run = GpuBurnRun(status="incomplete", gpus=[])
    recognised = False
    for raw in lines:
        recognised = _read_line(run, raw.strip()) or recognised
    if not recognised:
        raise unexpected(lines, "gpu_burn output ('Burning for N seconds', progress lines or 'Tested N GPUs')")
    run.status = _status(run)
    return run


def _gpu(run: GpuBurnRun, index: int) -> BurnGpu:
    while len(run.gpus) <= index:
        run.gpus.append(BurnGpu(index=len(run.gpus)))
    return run.gpus[index]


def _read_line(run: GpuBurnRun, line: str) -> bool:
    """Read one line into ``run``; True when it is one gpu_burn prints."""
    if match := PROGRESS.match(line):
        _read_progress(run, match)
    elif match := VERDICT.match(line):
        _gpu(run, int(match[1])).verdict = match[2]
    elif match := GPU_TITLE.match(line):
        gpu = _gpu(run, int(match[1]))
        gpu.name, gpu.uuid = match[2], match[3]
        return False  # nvidia-smi -L prints the same line; it alone does not make gpu_burn output
    elif match := TESTED.match(line):
        run.tested = int(match[1])
    elif match := BURNING.match(line):
        run.duration_s = int(match[1])
    elif match := INITIALISED.match(line):
        _gpu(run, int(match[1])).memory_mb = int(match[2])
        run.precision = match[3]
    elif ERROR_TEXT.search(line):
        run.errors.append(line)
        return False
    else:
        return False
    return True


def _read_progress(run: GpuBurnRun, match: re.Match) -> None:
    run.progress_pct = float(match[1])
    for index, (_, gflops) in enumerate(PROC_ENTRY.findall(match["proc"])):
        _gpu(run, index).gflops = float(gflops)
    for index, (count, _) in enumerate(ERROR_ENTRY.findall(match["errors"])):
        _gpu(run, index).errors = int(count)
    for index, temperature in enumerate(TEMPERATURE.findall(match["temps"])):
        _gpu(run, index).temperature_c = float(temperature)


def _status(run: GpuBurnRun) -> str:
    verdicts = [gpu.verdict for gpu in run.gpus if gpu.verdict]
    if "FAULTY" in verdicts:
        return "faulty"
    if run.errors:
        return "failed"
    if verdicts and run.tested is not None and len(verdicts) == run.tested:
        return "passed"
    return "incomplete"
