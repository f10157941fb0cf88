"""A training job's hangs and slowdowns, from its progress points (docs/workloads.md, "Hangs and slowdowns").

Pure: plain values in, a finding out; diagnosis opens the incident (apps/diagnosis/training_watch.py).
- hang: the newest step line is older than HANG_FACTOR × the job's median gap between step lines (at least
  HANG_MINIMUM: a progress read comes every minute or so, and a save pauses the steps);
- slowdown: the median step time of the newest RECENT points is more than SLOW_PERCENT above the median of the
  points before them (at least BASELINE of those).
"""

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

HANG_FACTOR = 5
HANG_MINIMUM = timedelta(minutes=5)
SLOW_PERCENT = 30.0
RECENT = 10
BASELINE = 20


@dataclass(frozen=True)
class Point:
    step: int
    time: datetime
    seconds_per_step: float | None = None


@dataclass(frozen=True)
class Stall:
    kind: str  # "hang" or "slowdown"
    since: datetime  # when the episode began: the last step line (hang), the first slow one (slowdown)
    step: int
    summary: str


def _gaps(points: Sequence[Point]) -> list[float]:
    return [
        (after.time - before.time).total_seconds()
        for before, after in zip(points, points[1:], strict=False)
        if after.time > before.time
    ]


def _step_times(points: Sequence[Point]) -> list[float]:
    """Each point's seconds per step: as the log gives it, else from the time and steps since the point before."""
    times = []
    for before, point in zip([None, *points], points, strict=False):
        if point.seconds_per_step:
            times.append(point.seconds_per_step)
        elif before is not None and point.step > before.step and point.time > before.time:
            times.append((point.time - before.time).total_seconds() / (point.step - before.step))
    return times


def hang(points: Sequence[Point], *, now: datetime, factor: float = HANG_FACTOR) -> Stall | None:
    """The step counter stopped: no step line for factor × the median gap between step lines (points in time
    order, at least three)."""
    if len(points) < 3:
        return None
    gaps = _gaps(points)
    if not gaps:
        return None
    limit = max(timedelta(seconds=factor * statistics.median(gaps)), HANG_MINIMUM)
    last = points[-1]
    quiet = now - last.time
    if quiet <= limit:
        return None
    return Stall(
        "hang",
        last.time,
        last.step,
        f"No step since step {last.step} at {last.time.isoformat(timespec='seconds')}: "
        f"{int(quiet.total_seconds())} s without progress, more than {int(limit.total_seconds())} s "
        f"({factor:g} × the median {statistics.median(gaps):.1f} s between step lines)",
    )


def slowdown(points: Sequence[Point], *, percent: float = SLOW_PERCENT) -> Stall | None:
    """The recent median step time is more than `percent` above the baseline's (the points before them)."""
    if len(points) < RECENT + BASELINE:
        return None
    recent, before = points[-RECENT:], points[:-RECENT]
    recent_times, baseline_times = _step_times(recent), _step_times(before)
    if len(recent_times) < RECENT // 2 or len(baseline_times) < BASELINE // 2:
        return None
    now_median, baseline = statistics.median(recent_times), statistics.median(baseline_times)
    if baseline <= 0 or now_median <= baseline * (1 + percent / 100):
        return None
    threshold = baseline * (1 + percent / 100)
    first = next((p for p in recent if (p.seconds_per_step or 0) > threshold), recent[0])
    return Stall(
        "slowdown",
        first.time,
        recent[-1].step,
        f"Step time {now_median:.2f} s (median of the last {len(recent)} step lines, to step {recent[-1].step}) "
        f"is {100 * (now_median / baseline - 1):.0f} % above the baseline {baseline:.2f} s "
        f"(more than {percent:g} %)",
    )


def stall(points: Sequence[Point], *, now: datetime) -> Stall | None:
    """A hang first (a stopped job has no recent step times), else a slowdown, else None."""
    return hang(points, now=now) or slowdown(points)
