"""A distributed training log read as a run: torchrun's attempts, ProcessGroupNCCL's watchdog timeouts, progress.

`parse_training_log(text)` keeps the last attempt apart from earlier ones (a log holds every restart), so a runbook
can ask what the run is doing now: hung (watchdog timeouts, with which ranks lag behind the others), crashed, or
making progress again (iteration lines after the last start).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

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
