"""Chrome-trace timelines (PyTorch profiler traces, Horovod timelines) reduced to compute vs communication time.

Communication is any duration event whose name or category mentions a collective (nccl, allreduce, allgather,
broadcast, alltoall, reduce_scatter, Horovod's NEGOTIATE/QUEUE/fusion-buffer activities, c10d, MPI, gloo).
Compute is GPU kernels that are not communication; a trace without GPU kernels (a CPU-only or Horovod trace)
counts its other operator events instead. Each side is the union of its intervals, so nested and overlapping
events are not counted twice. Shares are of the busy time (when either was running); compute and communication
overlap, so their shares can add up to more than 1, and the exposed share is communication nothing hid.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from .common import Result, require_content, unexpected
from .errors import ParseError

COMMUNICATION = re.compile(
    r"nccl|all_?reduce|all_?gather|reduce_?scatter|broadcast|all_?to_?all|horovod|negotiate|fusion_buffer|"
    r"wait_for_(?:other_tensor_)?data|^queue$|c10d::|record_param_comms|^mpi_|gloo",
    re.IGNORECASE,
)
# Categories that describe the trace itself or host-side bookkeeping, never compute.
NOT_COMPUTE_CATEGORIES = {
    "user_annotation",
    "gpu_user_annotation",
    "python_function",
    "cuda_runtime",
    "cuda_driver",
    "gpu_memcpy",
    "gpu_memset",
    "overhead",
    "trace",
}
KERNEL_CATEGORIES = {"kernel", "gpu_op"}


@dataclass
class Interval:
    start: float
    end: float


@dataclass
class TimelineSummary(Result):
    events: int
    duration_events: int
    compute_us: float
    communication_us: float
    overlap_us: float
    busy_us: float
    span_us: float
    compute_share: float | None
    communication_share: float | None
    exposed_communication_us: float
    exposed_communication_share: float | None
    compute_basis: str  # 'gpu_kernels' or 'operators'
    processes: dict[str, str] = field(default_factory=dict)
    top_communication: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False


def parse_timeline(text: str) -> TimelineSummary:
    """A Chrome trace: {"traceEvents": [...]}, a bare event array, or a partial array cut off mid-run."""
    lines = require_content(text, "a Chrome-trace timeline (JSON)")
    events, truncated = _load_events(text, lines)
    return summarise(events, truncated)


def _load_events(text: str, lines: list[str]) -> tuple[list[dict[str, Any]], bool]:
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("traceEvents"), list):
            return [event for event in data["traceEvents"] if isinstance(event, dict)], False
        if isinstance(data, dict) and "ph" in data:
            return [data], False
    if not stripped.startswith(("[", "{")):
        raise unexpected(lines, "a Chrome-trace timeline ('{\"traceEvents\": [...]}' or '[{\"ph\": ...}, ...')")
    return _stream_events(stripped)


def _stream_events(text: str) -> tuple[list[dict[str, Any]], bool]:
    """Events one by one from an array that may lack its closing bracket (Horovod writes it only on shutdown)."""
    decoder = json.JSONDecoder()
    position = 1 if text.startswith("[") else 0
    events: list[dict[str, Any]] = []
    while True:
        while position < len(text) and text[position] in " \t\r\n,":
            position += 1
        if position >= len(text):
            return events, True
        if text[position] == "]":
            return events, False
        try:
            event, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            if not events:
                raise ParseError(f"expected trace events: {exc.msg}", line=exc.lineno) from None
            return events, True  # the last event was cut off
        if not isinstance(event, dict) or "ph" not in event:
            raise ParseError("expected trace events with a 'ph' field", line=text.count("\n", 0, position) + 1)
        events.append(event)


def summarise(events: list[dict[str, Any]], truncated: bool = False) -> TimelineSummary:
    spans = _duration_spans(events)
    has_kernels = any(category in KERNEL_CATEGORIES for category, _, _ in spans)
    communication: list[Interval] = []
    compute: list[Interval] = []
    totals: dict[str, float] = {}
    for category, name, interval in spans:
        if COMMUNICATION.search(name) or COMMUNICATION.search(category):
            communication.append(interval)
            totals[name] = totals.get(name, 0.0) + interval.end - interval.start
        elif _is_compute(category, has_kernels):
            compute.append(interval)
    compute_union, communication_union = _union(compute), _union(communication)
    compute_us, communication_us = _length(compute_union), _length(communication_union)
    overlap_us = _length(_intersection(compute_union, communication_union))
    busy_us = compute_us + communication_us - overlap_us
    starts = [interval.start for _, _, interval in spans]
    ends = [interval.end for _, _, interval in spans]
    return TimelineSummary(
        events=len(events),
        duration_events=len(spans),
        compute_us=round(compute_us, 3),
        communication_us=round(communication_us, 3),
        overlap_us=round(overlap_us, 3),
        busy_us=round(busy_us, 3),
        span_us=round(max(ends) - min(starts), 3) if spans else 0.0,
        compute_share=round(compute_us / busy_us, 4) if busy_us else None,
        communication_share=round(communication_us / busy_us, 4) if busy_us else None,
        exposed_communication_us=round(communication_us - overlap_us, 3),
        exposed_communication_share=round((communication_us - overlap_us) / busy_us, 4) if busy_us else None,
        compute_basis="gpu_kernels" if has_kernels else "operators",
        processes=_process_names(events),
        top_communication=[
            {"name": name, "total_us": round(total, 3)}
            for name, total in sorted(totals.items(), key=lambda item: -item[1])[:5]
        ],
        truncated=truncated,
    )


def _is_compute(category: str, has_kernels: bool) -> bool:
    if has_kernels:
        return category in KERNEL_CATEGORIES
    return category.lower() not in NOT_COMPUTE_CATEGORIES


def _duration_spans(events: list[dict[str, Any]]) -> list[tuple[str, str, Interval]]:
    """(category, name, interval) for complete 'X' events and matched 'B'/'E' pairs."""
    spans: list[tuple[str, str, Interval]] = []
    open_events: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for event in events:
        phase = event.get("ph")
        timestamp = _number(event.get("ts"))
        if timestamp is None:
            continue
        if phase == "X" and (duration := _number(event.get("dur"))) is not None:
            spans.append(_span(event, timestamp, timestamp + duration))
        elif phase == "B":
            open_events.setdefault((event.get("pid"), event.get("tid")), []).append(event)
        elif phase == "E" and (stack := open_events.get((event.get("pid"), event.get("tid")))):
            begin = stack.pop()
            spans.append(_span(begin, _number(begin.get("ts")) or timestamp, timestamp))
    return spans


def _span(event: dict[str, Any], start: float, end: float) -> tuple[str, str, Interval]:
    return str(event.get("cat") or ""), str(event.get("name") or ""), Interval(start, max(start, end))


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _union(intervals: list[Interval]) -> list[Interval]:
    merged: list[Interval] = []
    for interval in sorted(intervals, key=lambda item: item.start):
        if merged and interval.start <= merged[-1].end:
            merged[-1].end = max(merged[-1].end, interval.end)
        else:
            merged.append(Interval(interval.start, interval.end))
    return merged


def _intersection(first: list[Interval], second: list[Interval]) -> list[Interval]:
    """Overlap of two sorted, disjoint interval lists."""
    result: list[Interval] = []
    i = j = 0
    while i < len(first) and j < len(second):
        start, end = max(first[i].start, second[j].start), min(first[i].end, second[j].end)
        if start < end:
            result.append(Interval(start, end))
        if first[i].end < second[j].end:
            i += 1
        else:
            j += 1
    return result


def _length(intervals: list[Interval]) -> float:
    return sum((interval.end - interval.start for interval in intervals), 0.0)


def _process_names(events: list[dict[str, Any]]) -> dict[str, str]:
    return {
        str(event.get("pid")): str((event.get("args") or {}).get("name"))
        for event in events
        if event.get("ph") == "M" and event.get("name") == "process_name"
    }
