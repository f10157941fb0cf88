"""A distributed training log read as a run: torchrun's attempts, ProcessGroupNCCL's watchdog timeouts, progress.

`parse_training_log(text)` keeps the last attempt apart from earlier ones (a log holds every restart), so a runbook
can ask what the run is doing now: hung (watchdog timeouts, with which ranks lag behind the others), crashed, or
making progress again (iteration lines after the last start).

`parse_progress(text)` reads the step lines as a series (step, time, loss, throughput, learning rate) in the formats
of Megatron-LM, DeepSpeed and detectron2, for the training job's progress and loss panel.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from .common import Result
from .logs import read_lines

RANK_PREFIX = r"\[rank(?P<rank>\d+)\]:"
WATCHDOG = re.compile(
    RANK_PREFIX + r".*Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d+), "
    r"OpType=(?P<op>\w+).*?Timeout\(ms\)=(?P<timeout>\d+)\) ran for (?P<ran>\d+) milliseconds"
)
WATCHDOG_WORK = re.compile(
    RANK_PREFIX + r".*detected by watchdog at work: (?P<seq>\d+), last enqueued NCCL work: (?P<enqueued>-?\d+), "
    r"last completed NCCL work: (?P<completed>-?\d+)"
)
ATTEMPT = re.compile(r"Starting worker group(?: \(attempt (?P<attempt>\d+)\))?|Rendezvous complete for workers")
ITERATION = re.compile(r"\biteration\s+(?P<step>\d+)\s*/\s*\d+")
# Megatron's resume line: "successfully loaded checkpoint from /ckpt/step_0004000 [ t 1/1, p 1/1 ] at iteration 4000"
LOADED = re.compile(r"successfully loaded checkpoint from (?P<path>\S+).*?\bat iteration\s+(?P<step>\d+)")
# Megatron's save line: "successfully saved checkpoint from iteration    2000 to /ckpt/step_0002000 [ t 1/1, p 1/1 ]"
SAVED = re.compile(r"successfully saved checkpoint (?:from|at) iteration\s+(?P<step>\d+) to (?P<path>\S+)")


@dataclass
class WatchdogTimeout(Result):
    """One rank's watchdog timeout: the work it was waiting on, and how far it had enqueued and completed."""

    rank: int
    seq: int
    op: str
    timeout_ms: int
    ran_ms: int
    line: int
    text: str
    last_enqueued: int | None = None
    last_completed: int | None = None


@dataclass
class TrainingLog(Result):
    attempts: int  # worker-group starts seen
    last_start_line: int | None  # where the last attempt begins (None: no start line in the text)
    timeouts: list[WatchdogTimeout] = field(default_factory=list)  # of the last attempt
    earlier_timeouts: int = 0
    last_step: int | None = None  # the newest iteration line of the last attempt
    steps_since_start: int = 0  # iteration lines in the last attempt
    resumed_from: int | None = None  # the step whose checkpoint the last attempt loaded (None: none loaded)
    resumed_path: str = ""  # and where that checkpoint was

    @property
    def lagging_ranks(self) -> list[int]:
        """Ranks that enqueued less work than the others: they are behind, the others wait for them."""
        enqueued = {t.rank: t.last_enqueued for t in self.timeouts if t.last_enqueued is not None}
        if len(set(enqueued.values())) < 2:
            return []
        lowest = min(enqueued.values())
        return sorted(rank for rank, value in enqueued.items() if value == lowest)


def parse_training_log(text: str) -> TrainingLog:
    log = TrainingLog(attempts=0, last_start_line=None)
    pending: dict[int, WatchdogTimeout] = {}
    for entry in read_lines(text):
        raw = entry.text
        if ATTEMPT.search(raw):
            log.attempts += 1
            log.last_start_line = entry.line
            log.earlier_timeouts += len(log.timeouts)
            log.timeouts, pending = [], {}
            log.last_step, log.steps_since_start = None, 0
            log.resumed_from, log.resumed_path = None, ""
        elif match := WATCHDOG.search(raw):
            timeout = WatchdogTimeout(
                rank=int(match["rank"]),
                seq=int(match["seq"]),
                op=match["op"],
                timeout_ms=int(match["timeout"]),
                ran_ms=int(match["ran"]),
                line=entry.line,
                text=raw,
            )
            log.timeouts.append(timeout)
            pending[timeout.rank] = timeout
        elif match := WATCHDOG_WORK.search(raw):
            timeout = pending.get(int(match["rank"]))
            if timeout is not None and timeout.seq == int(match["seq"]):
                timeout.last_enqueued, timeout.last_completed = int(match["enqueued"]), int(match["completed"])
        elif match := LOADED.search(raw):
            log.resumed_from, log.resumed_path = int(match["step"]), match["path"]
        elif match := ITERATION.search(raw):
            log.last_step = int(match["step"])
            log.steps_since_start += 1
    return log


@dataclass
class CheckpointSave(Result):
    """A checkpoint the log says was saved: its step, where, and the line (1-based) that says so."""

    step: int
    path: str
    line: int


def parse_checkpoint_saves(text: str) -> list[CheckpointSave]:
    """The checkpoint saves the log reports as finished, in the order written (a save that failed prints none)."""
    return [
        CheckpointSave(step=int(match["step"]), path=match["path"], line=entry.line)
        for entry in read_lines(text)
        if (match := SAVED.search(entry.text))
    ]


# --- progress: the step lines, as a series -------------------------------------------------------------------------

# Megatron-LM: " [2026-12-01 06:24:44] iteration     1200/  500000 | consumed samples: ... | elapsed time per
# iteration (ms): 1603.2 | learning rate: 3.000000E-04 | global batch size:   512 | lm loss: 2.345678E+00 | ..."
MEGATRON_STEP = re.compile(r"\biteration\s+(?P<step>\d+)\s*/\s*\d+\s*\|")
MEGATRON_FIELD = re.compile(r"(?P<name>[a-z][a-z ()]*?):\s*(?P<value>[-+0-9.eE]+|nan|inf)\s*(?=\||$)")
# DeepSpeed's log_dist and timer lines: "[Rank 0] step=10, skipped=6, lr=[9.6e-06, ...]" and
# "epoch=0/micro_step=10/global_step=10, RunningAvgSamplesPerSec=173.4, CurrSamplesPerSec=171.9, ..."
DEEPSPEED_STEP = re.compile(r"\[Rank 0\] step=(?P<step>\d+), skipped=\d+, lr=\[(?P<lr>[-+0-9.eE]+)")
DEEPSPEED_TIMER = re.compile(r"/global_step=(?P<step>\d+), .*?\bCurrSamplesPerSec=(?P<rate>[-+0-9.eE]+)")
# detectron2's EventWriter: "[12/20 18:16:09 d2.utils.events]:  eta: ... iter: 4959  total_loss: 10.31 ... time:
# 0.2815  data_time: 0.0115  lr: 2.5e-05  max_mem: 5418M" (the stamp has no year)
DETECTRON_STEP = re.compile(
    r"^\[(?P<month>\d\d)/(?P<day>\d\d) (?P<clock>\d\d:\d\d:\d\d) d2\.utils\.events\]:.*?\biter: (?P<step>\d+)"
)
DETECTRON_FIELD = re.compile(r"\b(?P<name>total_loss|lr|time): (?P<value>[-+0-9.eE]+)")
# Stamps: Megatron's "[2026-12-01 06:24:44]", DeepSpeed's "[2023-04-18 01:46:59,142]"
STAMP = re.compile(r"\[(?P<stamp>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:[,.](?P<ms>\d{1,6}))?\]")


@dataclass
class ProgressPoint(Result):
    """One step line: the step, when it was written (UTC as the log prints it; None without a stamp), and what the
    framework printed of loss, throughput and learning rate (None when the line has no such figure)."""

    step: int
    at: datetime | None
    line: int
    loss: float | None = None
    samples_per_second: float | None = None
    seconds_per_step: float | None = None
    learning_rate: float | None = None


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _stamp(raw: str) -> datetime | None:
    match = STAMP.search(raw)
    if match is None:
        return None
    moment = datetime.strptime(match["stamp"], "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    return moment.replace(microsecond=int((match["ms"] or "0").ljust(6, "0")))


def _without_year(match: re.Match, now: datetime | None) -> datetime | None:
    """A year-less stamp in the newest year that does not put it after `now` (as syslog readers do); None without
    `now`, since the year cannot be known then."""
    if now is None:
        return None
    for year in (now.year, now.year - 1):
        try:
            moment = datetime.strptime(f"{year}/{match['month']}/{match['day']} {match['clock']}", "%Y/%m/%d %H:%M:%S")
        except ValueError:  # 29 February of a year without one
            continue
        moment = moment.replace(tzinfo=UTC)
        if moment <= now:
            return moment
    return None


def _megatron(raw: str, stamped: str, step: int, line: int) -> ProgressPoint:
    fields = {match["name"].strip(): match["value"] for match in MEGATRON_FIELD.finditer(raw.split("|", 1)[1])}
    loss = next((fields[name] for name in fields if name.endswith("loss") and name != "loss scale"), None)
    elapsed_ms, batch = _number(fields.get("elapsed time per iteration (ms)")), _number(fields.get("global batch size"))
    rate = batch / (elapsed_ms / 1000) if elapsed_ms and batch else None
    return ProgressPoint(
        step=step,
        at=_stamp(stamped),
        line=line,
        loss=_number(loss),
        samples_per_second=rate,
        seconds_per_step=elapsed_ms / 1000 if elapsed_ms else None,
        learning_rate=_number(fields.get("learning rate")),
    )


def parse_progress(text: str, *, now: datetime | None = None) -> list[ProgressPoint]:
    """The step lines of a training log, in log order, one point per step (a later line of the same step, a rerun
    after a restart or DeepSpeed's timer line, completes or replaces the earlier). Reads Megatron-LM's iteration
    lines, DeepSpeed's step and timer lines and detectron2's event lines; `now` dates year-less stamps."""
    points: dict[int, ProgressPoint] = {}
    for entry in read_lines(text):
        raw = entry.message
        if match := MEGATRON_STEP.search(raw):
            point = _megatron(raw, entry.text, int(match["step"]), entry.line)
        elif match := DEEPSPEED_STEP.search(raw):
            step = int(match["step"])
            earlier = points.get(step)
            point = ProgressPoint(
                step=step,
                at=_stamp(entry.text),
                line=entry.line,
                learning_rate=_number(match["lr"]),
                samples_per_second=earlier.samples_per_second if earlier else None,
            )
        elif match := DEEPSPEED_TIMER.search(raw):
            step = int(match["step"])
            point = points.get(step) or ProgressPoint(step=step, at=_stamp(entry.text), line=entry.line)
            point.samples_per_second = _number(match["rate"])
        elif match := DETECTRON_STEP.search(entry.text):
            fields = {field["name"]: field["value"] for field in DETECTRON_FIELD.finditer(entry.text)}
            seconds = _number(fields.get("time"))
            point = ProgressPoint(
                step=int(match["step"]),
                at=_without_year(match, now),
                line=entry.line,
                loss=_number(fields.get("total_loss")),
                learning_rate=_number(fields.get("lr")),
                seconds_per_step=seconds,
            )
        else:
            continue
        points.pop(point.step, None)
        points[point.step] = point
    return list(points.values())
