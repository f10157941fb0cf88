"""Pure judging helpers: the figure a test is judged by, the fleet's robust z-score, and which rail is the slow one.

No Django here, so the kind's `cell_record` (on the fan-out's event loop) may call them.
"""

import statistics

from apps.parsers.nccl_tests import NcclTestResult

VERDICT_ORDER = ("pass", "warn", "fail", "could_not_run")  # better to worse
MAD_SCALE = 0.6745  # the modified z-score: 0.6745 (x − median) / MAD (Iglewicz and Hoaglin)
MAD_FLOOR_SHARE = 0.005  # a MAD below 0.5 % of the median is run-to-run noise: floor it there
RAIL_SLOW_SHARE = 0.9  # a rail below 90 % of the node's median rail is the slow one


def series(result: NcclTestResult) -> list[dict]:
    """Every row of the table, as stored and plotted."""
    return [
        {
            "size_bytes": row.size_bytes,
            "count": row.count,
            "time_us": row.out_of_place.time_us,
            "algbw_gb_per_s": row.out_of_place.algbw_gb_per_s,
            "busbw_gb_per_s": row.out_of_place.busbw_gb_per_s,
            "in_place_busbw_gb_per_s": row.in_place.busbw_gb_per_s,
            "wrong": row.out_of_place.wrong,
        }
        for row in result.rows
    ]


def figure(result: NcclTestResult) -> tuple[int | None, float | None]:
    """(size, busbw) judged: the out-of-place bus bandwidth at the largest size the table reached."""
    rows = [row for row in result.rows if row.out_of_place.busbw_gb_per_s is not None]
    if not rows:
        return None, None
    last = max(rows, key=lambda row: row.size_bytes)
    return last.size_bytes, last.out_of_place.busbw_gb_per_s


def robust_z(values: list[float]) -> list[float | None]:
    """Each value's modified z-score against the set's median and MAD; None for fewer than three values."""
    if len(values) < 3:
        return [None] * len(values)
    median = statistics.median(values)
    mad = statistics.median(abs(value - median) for value in values)
    mad = max(mad, abs(median) * MAD_FLOOR_SHARE, 1e-9)
    return [round(MAD_SCALE * (value - median) / mad, 2) for value in values]


def slow_rails(rails: dict[str, float | None]) -> list[str]:
    """The RDMA devices whose one-rail busbw is well below the node's median rail (none when all are alike)."""
    measured = {device: value for device, value in rails.items() if value is not None}
    if not measured:
        return []
    median = statistics.median(measured.values())
    slow = [device for device, value in measured.items() if value < RAIL_SLOW_SHARE * median]
    missing = [device for device, value in rails.items() if value is None]
    return sorted(slow + missing, key=lambda device: measured.get(device, -1.0))


def worse(first: str, second: str) -> str:
    """The worse of two verdicts."""
    return max(first, second, key=VERDICT_ORDER.index)
