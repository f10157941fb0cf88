"""The hang and slowdown rules over progress points (apps/workloads/stalls.py): a clock passed in, plain values."""

import datetime as dt

from apps.workloads import stalls

T0 = dt.datetime(2026, 12, 1, 8, 0, tzinfo=dt.UTC)


def series(count: int, *, every: float = 16.0, step_seconds: float = 1.6, start_step: int = 10) -> list[stalls.Point]:
    """Megatron's step lines every 10 steps of `step_seconds`."""
    return [stalls.Point(start_step + 10 * i, T0 + dt.timedelta(seconds=every * i), step_seconds) for i in range(count)]


def test_a_steady_job_neither_hangs_nor_slows():
    points = series(60)
    assert stalls.stall(points, now=points[-1].time + dt.timedelta(seconds=20)) is None


def test_a_hang_needs_five_median_gaps_and_at_least_the_minimum():
    points = series(40)
    last = points[-1].time
    assert stalls.hang(points, now=last + dt.timedelta(minutes=4, seconds=59)) is None  # 5 × 16 s < the 5 min floor
    found = stalls.hang(points, now=last + dt.timedelta(minutes=5, seconds=1))
    assert found.kind == "hang" and found.since == last and found.step == points[-1].step
    assert f"No step since step {points[-1].step}" in found.summary and "5 × the median 16.0 s" in found.summary
    slow_lines = series(40, every=120.0)  # a step line every two minutes: 10 minutes of quiet is normal
    assert stalls.hang(slow_lines, now=slow_lines[-1].time + dt.timedelta(minutes=9)) is None
    assert stalls.hang(slow_lines, now=slow_lines[-1].time + dt.timedelta(minutes=11)) is not None


def test_a_slowdown_is_the_recent_median_more_than_30_percent_above_the_baseline():
    baseline = series(30)
    slower = [
        stalls.Point(p.step + 300, p.time + dt.timedelta(seconds=480), 2.2) for p in series(10)
    ]  # 1.6 s -> 2.2 s: +37.5 %
    found = stalls.slowdown(baseline + slower)
    assert found.kind == "slowdown" and found.since == slower[0].time
    assert "38 % above the baseline 1.60 s" in found.summary
    a_little = [stalls.Point(p.step, p.time, 2.0) for p in slower]  # +25 %: within the bound
    assert stalls.slowdown(baseline + a_little) is None
    assert stalls.slowdown(slower) is None  # no baseline yet: nothing to compare with


def test_step_times_come_from_the_stamps_when_the_log_gives_none():
    points = [stalls.Point(10 * i, T0 + dt.timedelta(seconds=16 * i)) for i in range(30)]
    points += [stalls.Point(300 + 10 * i, T0 + dt.timedelta(seconds=480 + 32 * i)) for i in range(1, 11)]
    found = stalls.slowdown(points)
    assert found is not None and "baseline 1.60 s" in found.summary and "Step time 3.20 s" in found.summary
