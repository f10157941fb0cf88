"""Chrome-trace timelines read as a stream and broken down per training step and per rank.

Input is an iterable of text chunks (a file decoded piece by piece), so a trace is never held whole: the reader
keeps a bounded window of text and, per event, only what the breakdown needs (a few numbers). Both top-level
forms are read: PyTorch profiler's object (`{"schemaVersion": ..., "distributedInfo": {"rank": R, ...},
"traceEvents": [...]}`) and the bare event array Horovod writes (`[` then one event per line; the closing `]`
only on shutdown, so an array that ends after a complete event is a live timeline, flagged `truncated`). Anything
else — not JSON, JSON cut off inside an event or an object, an event without `ph` — raises ParseError with the
line and the character offset where it became clear.

The breakdown, per rank and step:

* steps: PyTorch's `ProfilerStep#N` annotations. A GPU kernel belongs to the step whose CPU window holds the
  runtime call that launched it (`args.correlation`); on the device a step runs from its first activity to the
  next step's first activity (the last step: to its last activity), so device idle between steps (a data loader
  the GPU waited for) is the step's idle time. A trace without step annotations is one step, the whole trace.
* communication: kernels (or, without kernels, operator and Horovod activities) whose name or category mentions a
  collective (`apps.parsers.timeline.COMMUNICATION`); compute: the other kernels (without kernels: operators that
  are not host bookkeeping). A Horovod timeline records communication only: its compute reads 0 and the rest of
  the time is idle (`compute_basis` "none").
* each side is the union of its intervals; overlap is their intersection; idle = step time − (compute ∪ comm).
  Shares are of the step time: compute-only + overlap + exposed communication + idle = 1.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .common import Result
from .errors import ParseError
from .timeline import (
    COMMUNICATION,
    KERNEL_CATEGORIES,
    NOT_COMPUTE_CATEGORIES,
    Interval,
    _intersection,
    _length,
    _union,
)

MAX_VALUE_CHARS = 4 * 2**20  # the longest single event or header value the reader keeps in its window
MAX_SPANS = 1_000_000  # duration events per rank kept for the breakdown (a few numbers each)
STEP = re.compile(r"^ProfilerStep#(\d+)$")
WHITESPACE = " \t\r\n"
HEADER_KEYS = ("schemaVersion", "distributedInfo", "displayTimeUnit", "deviceProperties", "traceName")
LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver"}


class TraceError(ParseError):
    """A trace that cannot be read, with where (1-based line, 0-based character offset of the decoded text)."""

    def __init__(self, message: str, line: int | None = None, offset: int | None = None):
        super().__init__(message, line=line)
        self.offset = offset

    def __str__(self) -> str:
        where = []
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{', '.join(where)}: {self.message}" if where else self.message


class _Window:
    """A bounded window over the chunks: the text not yet consumed, with its absolute offset and line."""

    def __init__(self, chunks: Iterable[str], limit: int):
        self._chunks = iter(chunks)
        self.text = ""
        self.position = 0
        self.base_offset = 0
        self.base_line = 1
        self.eof = False
        self.limit = limit
        # (position, newlines before it) where where() last counted: it goes on from there, as counting from the
        # window's start for each event was quadratic in a chunk's events.
        self._counted = (0, 0)

    def fill(self) -> bool:
        """Read one more chunk (dropping what was consumed); False at the end of the input."""
        if self.eof:
            return False
        if self.position:
            consumed = self.text[: self.position]
            self.base_line += consumed.count("\n")
            self.base_offset += len(consumed)
            self.text = self.text[self.position :]
            self.position = 0
            self._counted = (0, 0)
        for chunk in self._chunks:
            if chunk:
                self.text += chunk
                return True
        self.eof = True
        return False

    def where(self, position: int | None = None) -> tuple[int, int]:
        position = self.position if position is None else position
        counted_to, newlines = self._counted
        if position >= counted_to:
            newlines += self.text.count("\n", counted_to, position)
            self._counted = (position, newlines)
        else:
            newlines = self.text.count("\n", 0, position)
        return self.base_line + newlines, self.base_offset + position

    def error(self, message: str, position: int | None = None) -> TraceError:
        line, offset = self.where(position)
        return TraceError(message, line=line, offset=offset)

    def peek(self) -> str:
        """The next character after whitespace ('' at the end of the input)."""
        while True:
            while self.position < len(self.text) and self.text[self.position] in WHITESPACE:
                self.position += 1
            if self.position < len(self.text):
                return self.text[self.position]
            if not self.fill():
                return ""

    def value(self, decoder: json.JSONDecoder, what: str) -> Any:
        """One JSON value from the window, reading more text while it is incomplete (up to the window's limit)."""
        self.peek()
        while True:
            try:
                value, end = decoder.raw_decode(self.text, self.position)
            except json.JSONDecodeError as error:
                incomplete = error.pos >= len(self.text) - 16 or error.msg.startswith("Unterminated string")
                if not incomplete:
                    raise self.error(f"not JSON: {error.msg}", error.pos) from None
                if len(self.text) - self.position > self.limit:
                    raise self.error(f"{what} longer than {self.limit} characters") from None
                if self.fill():
                    continue
                raise self.error(f"truncated JSON: the input ends inside {what}") from None
            if end == len(self.text) and not self.eof and not isinstance(value, dict | list | str) and self.fill():
                continue  # a number or word may go on in the next chunk
            self.position = end
            return value


@dataclass
class _Span:
    start: float
    end: float
    communication: bool
    device: bool  # a GPU kernel (else a host-side operator or a Horovod activity)
    correlation: int | None
    compute_candidate: bool


@dataclass
class RankTrace:
    """What the reader kept of one rank's trace: header values, step windows, launches and spans."""

    source: str
    rank: int | None
    world_size: int | None
    events: int = 0
    truncated: bool = False
    header: dict[str, Any] = field(default_factory=dict)
    devices: dict[str, str] = field(default_factory=dict)
    steps: list[tuple[int, float, float]] = field(default_factory=list)  # (number, CPU start, CPU end)
    launches: dict[int, float] = field(default_factory=dict)  # correlation → CPU time of the launching call
    spans: list[_Span] = field(default_factory=list)
    has_kernels: bool = False


def read_trace(chunks: Iterable[str], *, source: str = "trace", max_spans: int = MAX_SPANS) -> RankTrace:
    """One rank's Chrome trace from text chunks; raises TraceError (line and offset) when it is not one."""
    window = _Window(chunks, MAX_VALUE_CHARS)
    decoder = json.JSONDecoder()
    trace = RankTrace(source=source, rank=None, world_size=None)
    first = window.peek()
    if first == "":
        raise TraceError("empty input, expected a Chrome-trace timeline (JSON)", line=1, offset=0)
    if first == "[":
        window.position += 1
        trace.truncated = _read_events(window, decoder, trace, max_spans, bare=True)
    elif first == "{":
        window.position += 1
        _read_object(window, decoder, trace, max_spans)
    else:
        raise window.error("expected a Chrome-trace timeline ('{\"traceEvents\": [...]}' or '[{\"ph\": ...}, ...')")
    info = trace.header.get("distributedInfo")
    if isinstance(info, dict):
        trace.rank = info.get("rank") if isinstance(info.get("rank"), int) else None
        trace.world_size = info.get("world_size") if isinstance(info.get("world_size"), int) else None
    return trace


def _read_object(window: _Window, decoder: json.JSONDecoder, trace: RankTrace, max_spans: int) -> None:
    seen_events = False
    while True:
        character = window.peek()
        if character == "}":
            window.position += 1
            break
        if character == "":
            raise window.error("truncated JSON: the input ends inside the trace object")
        if character != '"':
            raise window.error(f"not JSON: expected a key, found {character!r}")
        key = window.value(decoder, "a key")
        if window.peek() != ":":
            raise window.error("not JSON: expected ':' after a key")
        window.position += 1
        if key == "traceEvents":
            if window.peek() != "[":
                raise window.error("'traceEvents' is not a list of events")
            window.position += 1
            if _read_events(window, decoder, trace, max_spans, bare=False):
                raise window.error("truncated JSON: the input ends inside 'traceEvents'")
            seen_events = True
        else:
            value = window.value(decoder, f"the value of {key!r}")
            if key in HEADER_KEYS:
                trace.header[key] = value
        character = window.peek()
        if character == ",":
            window.position += 1
        elif character == "}":
            window.position += 1
            break
        elif character == "":
            raise window.error("truncated JSON: the input ends inside the trace object")
        else:
            raise window.error(f"not JSON: expected ',' or '}}', found {character!r}")
    if not seen_events:
        raise window.error("a JSON object without 'traceEvents': not a Chrome-trace timeline")
    if window.peek() != "":
        raise window.error("not JSON: text after the trace object")


def _read_events(window: _Window, decoder: json.JSONDecoder, trace: RankTrace, max_spans: int, *, bare: bool) -> bool:
    """Events up to the closing ']'; True when the input ended between events (Horovod's live timeline)."""
    open_events: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    while True:
        character = window.peek()
        if character == "," and trace.events:
            window.position += 1
            character = window.peek()
        if character == "]":
            window.position += 1
            if bare and window.peek() != "":
                raise window.error("not JSON: text after the event array")
            return False
        if character == "":
            if bare and trace.events:
                return True
            raise window.error("truncated JSON: the input ends inside the event list")
        if character != "{":
            raise window.error(f"expected a trace event (a JSON object), found {character!r}")
        line, offset = window.where()  # the event's start (the window may move while it is read)
        event = window.value(decoder, "a trace event")
        if "ph" not in event:
            raise TraceError("expected trace events with a 'ph' field", line=line, offset=offset)
        trace.events += 1
        _take(event, trace, open_events)
        if len(trace.spans) > max_spans:
            raise TraceError(f"more than {max_spans} duration events in one trace", line=line, offset=offset)
        character = window.peek()
        if character not in (",", "]", ""):
            raise window.error(f"not JSON: expected ',' or ']' after an event, found {character!r}")


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _take(event: dict[str, Any], trace: RankTrace, open_events: dict) -> None:
    phase = event.get("ph")
    if phase == "M":
        if event.get("name") == "process_labels":
            trace.devices[str(event.get("pid"))] = str((event.get("args") or {}).get("labels"))
        return
    timestamp = _number(event.get("ts"))
    if timestamp is None:
        return
    if phase == "X":
        duration = _number(event.get("dur"))
        if duration is not None:
            _span(event, timestamp, timestamp + max(duration, 0.0), trace)
    elif phase == "B":
        open_events.setdefault((event.get("pid"), event.get("tid")), []).append(event)
    elif phase == "E" and (stack := open_events.get((event.get("pid"), event.get("tid")))):
        begin = stack.pop()
        start = _number(begin.get("ts"))
        _span(begin, timestamp if start is None else start, timestamp, trace)


def _span(event: dict[str, Any], start: float, end: float, trace: RankTrace) -> None:
    category, name = str(event.get("cat") or ""), str(event.get("name") or "")
    args = event.get("args") if isinstance(event.get("args"), dict) else {}
    correlation = args.get("correlation") if isinstance(args.get("correlation"), int) else None
    if category == "user_annotation" and (match := STEP.match(name)):
        trace.steps.append((int(match.group(1)), start, end))
        return
    if category in LAUNCH_CATEGORIES:
        if correlation is not None:
            trace.launches[correlation] = start
        return
    device = category in KERNEL_CATEGORIES
    trace.has_kernels = trace.has_kernels or device
    communication = bool(COMMUNICATION.search(name) or COMMUNICATION.search(category))
    compute_candidate = category.lower() not in NOT_COMPUTE_CATEGORIES and category != "Trace"
    if communication or compute_candidate or device:
        trace.spans.append(_Span(start, max(start, end), communication, device, correlation, compute_candidate))


# --- the breakdown ----------------------------------------------------------------------------------------------


@dataclass
class StepBreakdown(Result):
    step: str
    start_us: float
    duration_us: float
    compute_us: float
    communication_us: float
    overlap_us: float
    idle_us: float

    @property
    def exposed_communication_us(self) -> float:
        return self.communication_us - self.overlap_us


@dataclass
class RankBreakdown(Result):
    rank: int
    source: str
    compute_basis: str  # 'gpu_kernels', 'operators' or 'none' (a Horovod timeline: communication only)
    events: int
    truncated: bool
    steps: list[StepBreakdown]
    step_us: float  # mean step time
    compute_us: float  # mean per step, and so on
    communication_us: float
    overlap_us: float
    idle_us: float
    communication_share: float | None
    exposed_communication_share: float | None
    compute_share: float | None
    idle_share: float | None


@dataclass
class TimelineBreakdown(Result):
    ranks: list[RankBreakdown]
    world_size: int | None
    step_count: int
    step_us: float
    compute_share: float | None
    communication_share: float | None
    overlap_share: float | None
    exposed_communication_share: float | None
    idle_share: float | None
    slowest_rank: int | None
    slowest_rank_step_us: float | None
    slowest_rank_compute_pct_above_median: float | None
    notes: list[str] = field(default_factory=list)


def _share(part: float, whole: float) -> float | None:
    return round(part / whole, 4) if whole > 0 else None


def _step_windows(trace: RankTrace) -> list[tuple[str, list[_Span]]]:
    """The rank's spans grouped by step (in step order); one group for the whole trace without annotations."""
    kernels_only = trace.has_kernels
    spans = [span for span in trace.spans if span.device] if kernels_only else trace.spans
    if not trace.steps:
        return [("all", spans)] if spans else []
    steps = sorted(trace.steps, key=lambda item: item[1])
    starts = [start for _, start, _ in steps]
    groups: dict[int, list[_Span]] = {number: [] for number, _, _ in steps}
    for span in spans:
        when = trace.launches.get(span.correlation, span.start) if span.correlation is not None else span.start
        index = _last_at_or_before(starts, when)
        if index is None:
            continue  # before the first annotated step (the profiler's warm-up)
        number, _, end = steps[index]
        if not kernels_only and span.start >= end and index == len(steps) - 1:
            continue  # host work after the last step
        groups[number].append(span)
    return [(f"{number}", groups[number]) for number, _, _ in steps if groups[number]]


def _last_at_or_before(starts: list[float], when: float) -> int | None:
    low, high = 0, len(starts)
    while low < high:
        middle = (low + high) // 2
        if starts[middle] <= when:
            low = middle + 1
        else:
            high = middle
    return low - 1 if low else None


def breakdown_rank(trace: RankTrace, rank: int) -> RankBreakdown:
    basis = "gpu_kernels" if trace.has_kernels else "operators"
    groups = _step_windows(trace)
    if not trace.has_kernels and not any(span.compute_candidate and not span.communication for span in trace.spans):
        basis = "none"
    firsts = [min(span.start for span in spans) for _, spans in groups]
    steps = []
    for index, (label, spans) in enumerate(groups):
        start = firsts[index]
        end = firsts[index + 1] if index + 1 < len(groups) else max(span.end for span in spans)
        window = [Interval(start, end)]
        communication = _intersection(_union([Interval(s.start, s.end) for s in spans if s.communication]), window)
        compute = _intersection(
            _union(
                [Interval(s.start, s.end) for s in spans if not s.communication and (s.device or s.compute_candidate)]
            ),
            window,
        )
        compute_us, communication_us = _length(compute), _length(communication)
        overlap_us = _length(_intersection(compute, communication))
        duration = end - start
        steps.append(
            StepBreakdown(
                step=label,
                start_us=round(start, 3),
                duration_us=round(duration, 3),
                compute_us=round(compute_us, 3),
                communication_us=round(communication_us, 3),
                overlap_us=round(overlap_us, 3),
                idle_us=round(max(0.0, duration - (compute_us + communication_us - overlap_us)), 3),
            )
        )
    count = len(steps) or 1
    total = sum(step.duration_us for step in steps)
    compute = sum(step.compute_us for step in steps)
    communication = sum(step.communication_us for step in steps)
    overlap = sum(step.overlap_us for step in steps)
    idle = sum(step.idle_us for step in steps)
    return RankBreakdown(
        rank=rank,
        source=trace.source,
        compute_basis=basis,
        events=trace.events,
        truncated=trace.truncated,
        steps=steps,
        step_us=round(total / count, 3),
        compute_us=round(compute / count, 3),
        communication_us=round(communication / count, 3),
        overlap_us=round(overlap / count, 3),
        idle_us=round(idle / count, 3),
        communication_share=_share(communication, total),
        exposed_communication_share=_share(communication - overlap, total),
        compute_share=_share(compute, total),
        idle_share=_share(idle, total),
    )


def breakdown(traces: list[RankTrace]) -> TimelineBreakdown:
    """Every rank's breakdown, the shares over all ranks and steps, and the slowest rank.

    The slowest rank is the one with the most compute per step: in data-parallel training the others wait for it
    inside the collectives, so its peers show the communication its compute caused."""
    notes: list[str] = []
    ranks: list[RankBreakdown] = []
    used: set[int] = set()
    for position, trace in enumerate(traces):
        rank = trace.rank if trace.rank is not None and trace.rank not in used else position
        while rank in used:
            rank += 1
        used.add(rank)
        ranks.append(breakdown_rank(trace, rank))
        if trace.truncated:
            notes.append(f"{trace.source}: the event array has no closing ']' (a timeline still being written)")
        if trace.rank is None:
            notes.append(f"{trace.source}: no distributedInfo.rank; numbered {rank} by its position")
    ranks.sort(key=lambda item: item.rank)
    if not any(rank.steps for rank in ranks):
        raise TraceError("the trace has no duration events to break down (no kernels, operators or activities)")
    if any(rank.compute_basis == "none" for rank in ranks):
        notes.append("a Horovod timeline records communication only: its compute reads 0, the rest is idle")
    steps = [step for rank in ranks for step in rank.steps]
    total = sum(step.duration_us for step in steps)
    compute = sum(step.compute_us for step in steps)
    communication = sum(step.communication_us for step in steps)
    overlap = sum(step.overlap_us for step in steps)
    idle = sum(step.idle_us for step in steps)
    slowest, above = None, None
    timed = [rank for rank in ranks if rank.steps]
    if len(timed) > 1:
        slowest = max(timed, key=lambda rank: rank.compute_us)
        median = statistics.median(rank.compute_us for rank in timed)
        above = round(100 * (slowest.compute_us - median) / median, 1) if median else None
    elif timed:
        slowest = timed[0]
    worlds = {trace.world_size for trace in traces if trace.world_size}
    return TimelineBreakdown(
        ranks=ranks,
        world_size=max(worlds) if worlds else None,
        step_count=max(len(rank.steps) for rank in ranks),
        step_us=round(total / len(steps), 3) if steps else 0.0,
        compute_share=_share(compute, total),
        communication_share=_share(communication, total),
        overlap_share=_share(overlap, total),
        exposed_communication_share=_share(communication - overlap, total),
        idle_share=_share(idle, total),
        slowest_rank=slowest.rank if slowest else None,
        slowest_rank_step_us=slowest.step_us if slowest else None,
        slowest_rank_compute_pct_above_median=above,
        notes=notes,
    )


def chunks_of(text: str, size: int = 2**16) -> Iterator[str]:
    """A text as chunks (for callers and tests that hold a small trace whole)."""
    for start in range(0, len(text), size):
        yield text[start : start + size]
