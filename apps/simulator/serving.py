"""The simulated inference services' serving engine: the OpenAI-compatible completions API that vLLM serves, and the
ledger of what it served, which the telemetry model adds to its own figures.

Pace (docs/monitoring.md, "Business validation"): a service's engine generates at most its capacity (design tokens/s
times the mean speed of its nodes: a power cap, a thermal slowdown or a straggler slow it) minus what its background
demand already takes (the daily wave of apps.simulator.telemetry). Each stream decodes at most STREAM_TOKENS_PER_S
times that speed; k streams in flight share the spare capacity, so a load test with enough concurrency saturates the
service, and one with too little does not. Time to first token is the prefill of the prompt at the same speed plus a
scheduling step, log-normal around that (seeded per request).

Everything the engine serves is written in the ledger, second by second: generated and prompt tokens, requests
finished, and vLLM's two latency histograms (end to end, time to first token). The telemetry model adds the ledger
to the service's counters (so its /metrics moves) and to its GPUs' busy fraction (so utilisation, power and the
energy counters move). The exporter process keeps the ledger in memory and stores it (SimServingLoad rows, one per
service and second) so that other processes' models see the same served load.
"""

import bisect
import json
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from apps.simulator.model import noise
from apps.simulator.telemetry import LATENCY_BUCKETS, TTFT_SIGMA, ClusterTelemetry, ServingRun

STREAM_TOKENS_PER_S = 180.0  # one stream's decode rate on a healthy node: ~5.5 ms between tokens (70B, TP8, H200)
PREFILL_TOKENS_PER_S = 40_000.0  # one request's prefill rate on a healthy node
SCHEDULING_S = 0.004  # the engine step a new request waits for
MAX_WAIT_S = 30.0  # a request that cannot get a token within this answers 503 (a node lost: no capacity at all)
WIDTH = 5 + 2 * len(LATENCY_BUCKETS)  # a ledger row: see COLUMNS
# tokens, requests, e2e_sum, ttft_sum, e2e buckets..., ttft buckets..., prompt tokens (the telemetry model's order
# for the first 4 + 2 x buckets columns, so rows add to its integrals as they are).
PROMPT_COLUMN = WIDTH - 1


class EngineUnavailable(Exception):
    """The service cannot serve now (a node of it has lost a GPU: no capacity); answered 503."""


class ServingLedger:
    """What the simulated endpoints served, per service and whole second (unix time). Thread-safe."""

    def __init__(self, rows: dict[str, dict[int, list[float]]] | None = None):
        self._rows: dict[str, dict[int, list[float]]] = rows or {}
        self._seconds: dict[str, list[int]] = {name: sorted(seconds) for name, seconds in self._rows.items()}
        self._dirty: set[tuple[str, int]] = set()
        self._lock = threading.Lock()
        self.in_flight: dict[str, int] = {}

    @classmethod
    def from_rows(cls, rows) -> "ServingLedger":
        """From (service, second, values) triples (the stored rows)."""
        table: dict[str, dict[int, list[float]]] = {}
        for service, second, values in rows:
            if len(values) == WIDTH:
                table.setdefault(service, {})[int(second)] = [float(v) for v in values]
        return cls(table)

    def _row(self, service: str, second: int) -> list[float]:
        rows = self._rows.setdefault(service, {})
        if second not in rows:
            rows[second] = [0.0] * WIDTH
            bisect.insort(self._seconds.setdefault(service, []), second)
        self._dirty.add((service, second))
        return rows[second]

    def add_tokens(self, service: str, t: float, count: int) -> None:
        with self._lock:
            self._row(service, math.floor(t))[0] += count

    def add_request(self, service: str, t: float, *, prompt_tokens: int, e2e_s: float, ttft_s: float) -> None:
        """A request finished at t: counted, and its latencies put in vLLM's buckets."""
        size = len(LATENCY_BUCKETS)
        with self._lock:
            row = self._row(service, math.floor(t))
            row[1] += 1
            row[2] += e2e_s
            row[3] += ttft_s
            for index, le in enumerate(LATENCY_BUCKETS):
                row[4 + index] += e2e_s <= le
                row[4 + size + index] += ttft_s <= le
            row[PROMPT_COLUMN] += prompt_tokens

    def tokens_in_second(self, service: str, second: int) -> float | None:
        row = self._rows.get(service, {}).get(second)
        return row[0] if row else None

    def seconds_within(self, service: str, a: float, b: float) -> list[int]:
        """Seconds with served load that overlap [a, b]."""
        seconds = self._seconds.get(service, [])
        with self._lock:
            return seconds[bisect.bisect_left(seconds, math.floor(a)) : bisect.bisect_left(seconds, b)]

    def window_sum(self, service: str, a: float, b: float) -> list[float]:
        """The rows of the seconds starting in [a, b), added: what the engine served in that window."""
        total = [0.0] * WIDTH
        rows = self._rows.get(service, {})
        seconds = self._seconds.get(service, [])
        with self._lock:
            chosen = seconds[bisect.bisect_left(seconds, math.ceil(a)) : bisect.bisect_left(seconds, b)]
            for second in chosen:
                for column, value in enumerate(rows[second]):
                    total[column] += value
        return total

    def take_dirty(self) -> list[tuple[str, int, list[float]]]:
        """The rows changed since the last call (for storing), with their whole values."""
        with self._lock:
            dirty, self._dirty = self._dirty, set()
            return [(service, second, list(self._rows[service][second])) for service, second in sorted(dirty)]

    def forget_before(self, second: int) -> None:
        with self._lock:
            for service, rows in self._rows.items():
                seconds = self._seconds.get(service, [])
                cut = bisect.bisect_left(seconds, second)
                for old in seconds[:cut]:
                    rows.pop(old, None)
                self._seconds[service] = seconds[cut:]


# --- the engine: pacing one request ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pace:
    ttft_s: float
    tokens_per_second: float  # this stream's decode rate now


def pace(model: ClusterTelemetry, run: ServingRun, t: float, *, streams: int, prompt_tokens: int, key: str) -> Pace:
    """How fast a stream of `run` goes at t with `streams` in flight (this one included)."""
    capacity = model.service_capacity(run, t)
    if capacity <= 0:
        raise EngineUnavailable(f"{run.name} has no capacity: a node of it lost a GPU")
    background = min(capacity, model.demand(run, t))
    spare = max(capacity - background, 0.02 * capacity) * run.design_tokens_per_second
    speed = min(1.0, capacity)
    rate = min(STREAM_TOKENS_PER_S * speed, spare / max(streams, 1))
    median = (SCHEDULING_S + prompt_tokens / PREFILL_TOKENS_PER_S) / speed
    ttft = median * math.exp(TTFT_SIGMA * noise(model.seed, "ttft", run.name, key).gauss(0, 1))
    return Pace(ttft, rate)


def output_length(seed: int, service: str, key: str, max_tokens: int, ignore_eos: bool) -> int:
    """How many tokens a completion gets: all of max_tokens with ignore_eos (as load tests ask), else a seeded
    length between half of it and all of it (the model stopped)."""
    if ignore_eos or max_tokens <= 1:
        return max_tokens
    return noise(seed, "length", service, key).randint(max(1, max_tokens // 2), max_tokens)


WORDS = ("the", "cluster", "serves", "tokens", "at", "its", "design", "rate", "and", "every", "GPU", "stays", "busy")


def token_text(index: int) -> str:
    return ("" if index == 0 else " ") + WORDS[index % len(WORDS)]


def prompt_length(prompt) -> int:
    """Tokens of a prompt, as a tokenizer would count them: ~4 characters a token; a list of ids counts itself."""
    if isinstance(prompt, list) and all(isinstance(item, int) for item in prompt):
        return len(prompt)
    if isinstance(prompt, list):
        return sum(prompt_length(item) for item in prompt)
    return max(1, math.ceil(len(str(prompt)) / 4))


class RequestError(Exception):
    """A request the OpenAI API refuses (400), with its message."""


@dataclass(frozen=True)
class Request:
    chat: bool
    model: str
    prompt_tokens: int
    max_tokens: int
    stream: bool
    include_usage: bool
    ignore_eos: bool


def parse_request(body: bytes, *, chat: bool, model: str) -> Request:
    """The OpenAI request body; RequestError naming the field for what vLLM would refuse."""
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        raise RequestError("The body is not valid JSON.") from None
    if not isinstance(data, dict):
        raise RequestError("The body must be a JSON object.")
    if data.get("model", model) != model:
        raise RequestError(f"The model `{data.get('model')}` does not exist.")
    if chat:
        messages = data.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError("messages: a non-empty list of {role, content} is required.")
        prompt = [str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in messages]
    else:
        if "prompt" not in data:
            raise RequestError("prompt: this field is required.")
        prompt = data["prompt"]
    max_tokens = data.get("max_completion_tokens" if chat and "max_completion_tokens" in data else "max_tokens", 16)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 1 <= max_tokens <= 32_768:
        raise RequestError("max_tokens: an integer from 1 to 32768.")
    options = data.get("stream_options") or {}
    return Request(
        chat=chat,
        model=model,
        prompt_tokens=prompt_length(prompt) + (3 * len(prompt) if chat else 0),  # the chat template's tokens
        max_tokens=max_tokens,
        stream=bool(data.get("stream", False)),
        include_usage=bool(isinstance(options, dict) and options.get("include_usage")),
        ignore_eos=bool(data.get("ignore_eos", False)),
    )


class Engine:
    """Serves completions for the simulated services of a model source, writing what it serves into the ledger."""

    def __init__(self, *, model: Callable[[], ClusterTelemetry], ledger: ServingLedger, clock=time.time, sleep=None):
        self.model, self.ledger, self.clock = model, ledger, clock
        self.sleep = sleep or time.sleep
        self._lock = threading.Lock()

    def _enter(self, service: str) -> int:
        with self._lock:
            self.ledger.in_flight[service] = self.ledger.in_flight.get(service, 0) + 1
            return self.ledger.in_flight[service]

    def _leave(self, service: str) -> None:
        with self._lock:
            self.ledger.in_flight[service] = max(0, self.ledger.in_flight.get(service, 1) - 1)

    def streams(self, service: str) -> int:
        return self.ledger.in_flight.get(service, 0)

    def serve(self, run: ServingRun, request: Request) -> Iterator[tuple[str, int]]:
        """Yields (text, index) token by token, paced by the engine; writes the ledger as it goes."""
        key = uuid.uuid4().hex
        started = self.clock()
        self._enter(run.name)
        first_at = None
        try:
            model = self.model()
            total = output_length(model.seed, run.name, key, request.max_tokens, request.ignore_eos)
            first = pace(
                model, run, started, streams=self.streams(run.name), prompt_tokens=request.prompt_tokens, key=key
            )
            due = started + first.ttft_s
            for index in range(total):
                now = self.clock()
                if due > now:
                    self.sleep(due - now)
                emitted = max(self.clock(), due)
                if first_at is None:
                    first_at = emitted
                self.ledger.add_tokens(run.name, emitted, 1)
                yield token_text(index), index
                step = pace(model, run, emitted, streams=self.streams(run.name), prompt_tokens=0, key=key)
                due = max(due, emitted - 0.05) + 1.0 / step.tokens_per_second  # late tokens catch up, a little
        finally:
            self._leave(run.name)
            ended = self.clock()
            if first_at is not None:
                self.ledger.add_request(
                    run.name,
                    ended,
                    prompt_tokens=request.prompt_tokens,
                    e2e_s=ended - started,
                    ttft_s=first_at - started,
                )
