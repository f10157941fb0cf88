"""A serving load test against an OpenAI-compatible endpoint (vLLM, or the simulator's): a fixed load profile,
streamed requests, and what each one took. No Django here: the business-validation kind hands it plain values.

Each request asks for `output_tokens` tokens (`ignore_eos`, so every request is as long as the profile says) of a
prompt of about `prompt_tokens` tokens, streamed (`stream: true`, `stream_options.include_usage`), so the time to the
first token and the gaps between tokens are seen as a client sees them. `concurrency` requests are in flight at once
until `requests` have been sent. The server's own token counter (vLLM's /metrics beside /v1) is read before and after,
each read timed, so the counter's increase is known over the span between the two reads (longer than the run by what
the reads themselves took, which a loaded machine stretches).
"""

import json
import math
import threading
import time
import urllib.parse
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import requests
from prometheus_client.parser import text_string_to_metric_families

from apps.core.outbound import OutboundRefused, check_target

GENERATION_TOKENS = "vllm:generation_tokens"  # the family of vllm:generation_tokens_total
PROMPT_WORDS = "Summarise the state of the cluster for the operator on call in plain words "


class EndpointRefused(ValueError):
    """An endpoint Rackpilot does not call: not http(s), or a link-local or cloud metadata address."""


def check_endpoint(url: str) -> str:
    """The base URL (no trailing slash) if Rackpilot may call it; EndpointRefused saying why otherwise."""
    parsed = urllib.parse.urlsplit(url or "")
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise EndpointRefused(f"the endpoint must be an http(s) URL such as http://llama.svc:8000/v1, not {url!r}")
    try:
        check_target(parsed.hostname)
    except OutboundRefused as error:
        raise EndpointRefused(str(error)) from None
    return url.rstrip("/")


def metrics_url(base: str) -> str:
    """vLLM serves /metrics beside /v1: http://host:8000/v1 -> http://host:8000/metrics."""
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    return f"{root}/metrics"


@dataclass(frozen=True)
class Profile:
    concurrency: int
    requests: int
    prompt_tokens: int
    output_tokens: int
    api: str  # "completions" or "chat"
    timeout_seconds: float


@dataclass
class Outcome:
    """One request: when it started (unix), how long to its first token and to its end, the gaps between chunks."""

    started: float
    ok: bool
    ttft_s: float | None = None
    e2e_s: float | None = None
    tokens: int = 0
    prompt_tokens: int = 0
    gaps_s: list[float] = field(default_factory=list)
    error: str = ""


@dataclass
class LoadResult:
    base_url: str
    started: float
    ended: float
    outcomes: list[Outcome]
    server_tokens_before: float | None
    server_tokens_after: float | None
    metrics_error: str = ""
    counter_span: float | None = None  # seconds between the two counter reads (each read's midpoint)

    @property
    def duration(self) -> float:
        return max(self.ended - self.started, 1e-6)

    @property
    def succeeded(self) -> list[Outcome]:
        return [outcome for outcome in self.outcomes if outcome.ok]

    @property
    def failed(self) -> list[Outcome]:
        return [outcome for outcome in self.outcomes if not outcome.ok]

    @property
    def server_tokens(self) -> float | None:
        if self.server_tokens_before is None or self.server_tokens_after is None:
            return None
        after, before = self.server_tokens_after, self.server_tokens_before
        return after - before if after >= before else after  # a restart in between: the counter began again


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100), linear between the closest ranks (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def prompt_text(tokens: int) -> str:
    """About `tokens` tokens of English (~4 characters a token)."""
    words = PROMPT_WORDS * (tokens * 4 // len(PROMPT_WORDS) + 1)
    return words[: max(4, tokens * 4)]


def read_generation_tokens(url: str, *, timeout: float) -> float:
    """The sum of vllm:generation_tokens_total over its label sets, from a /metrics page."""
    response = requests.get(url, timeout=timeout)
    response.raise_for_status()
    total, found = 0.0, False
    for family in text_string_to_metric_families(response.text):
        if family.name == GENERATION_TOKENS:
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    total, found = total + sample.value, True
    if not found:
        raise ValueError(f"{url} has no vllm:generation_tokens_total")
    return total


def _body(profile: Profile, model: str) -> dict:
    text = prompt_text(profile.prompt_tokens)
    body = {
        "model": model,
        "max_tokens": profile.output_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,  # vLLM's: every completion as long as the profile says
        "temperature": 0,
    }
    if profile.api == "chat":
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = text
    return body


def _describe(error: Exception, url: str) -> str:
    if isinstance(error, requests.Timeout):
        return f"no answer from {url} within the timeout"
    if isinstance(error, requests.ConnectionError):
        return f"could not connect to {url}"
    return f"{url}: {error}"[:300]


def one_request(session: requests.Session, url: str, body: dict, profile: Profile) -> Outcome:
    """Send one streamed request and time it as a client sees it."""
    started_wall, started = time.time(), time.perf_counter()
    outcome = Outcome(started=started_wall, ok=False)
    try:
        with session.post(url, json=body, stream=True, timeout=profile.timeout_seconds) as response:
            if response.status_code != 200:
                try:
                    message = response.json().get("message") or response.text
                except ValueError:
                    message = response.text
                outcome.error = f"{url} answered HTTP {response.status_code}: {str(message)[:200]}"
                return outcome
            last, chunks = None, 0
            for line in response.iter_lines(chunk_size=None):  # each chunk as it arrives, not 512 bytes at a time
                if not line.startswith(b"data: "):
                    continue
                data = line[6:]
                if data == b"[DONE]":
                    break
                chunk = json.loads(data)
                usage = chunk.get("usage")
                if usage:
                    outcome.tokens = int(usage.get("completion_tokens") or outcome.tokens)
                    outcome.prompt_tokens = int(usage.get("prompt_tokens") or 0)
                for choice in chunk.get("choices") or []:
                    text = choice.get("text") if "text" in choice else (choice.get("delta") or {}).get("content")
                    if not text:
                        continue
                    now = time.perf_counter()
                    if last is None:
                        outcome.ttft_s = now - started
                    else:
                        outcome.gaps_s.append(now - last)
                    last = now
                    chunks += 1
            outcome.tokens = outcome.tokens or chunks  # usage's count when the server sent it, else one a chunk
            outcome.e2e_s = time.perf_counter() - started
            outcome.ok = outcome.ttft_s is not None
            if not outcome.ok:
                outcome.error = f"{url} streamed no tokens"
    except (requests.RequestException, ValueError) as error:
        outcome.error = _describe(error, url)
    return outcome


def run(
    base_url: str,
    *,
    model: str,
    profile: Profile,
    stop: threading.Event | None = None,
    progress: Callable[[int], None] | None = None,
) -> LoadResult:
    """Run the profile against base_url (checked first with check_endpoint; EndpointRefused otherwise)."""
    base = check_endpoint(base_url)
    url = f"{base}/{'chat/completions' if profile.api == 'chat' else 'completions'}"
    stop = stop or threading.Event()
    local = threading.local()
    body = _body(profile, model)
    scrape, metrics_error = metrics_url(base), ""

    def counter() -> tuple[float | None, float]:
        """The counter and when it was read: the midpoint of the request, as the server reads it in between."""
        nonlocal metrics_error
        asked = time.time()
        try:
            value = read_generation_tokens(scrape, timeout=min(profile.timeout_seconds, 10.0))
        except (requests.RequestException, ValueError) as error:
            metrics_error, value = _describe(error, scrape), None
        return value, (asked + time.time()) / 2

    def task(_: int) -> Outcome | None:
        if stop.is_set():
            return None
        if not hasattr(local, "session"):
            local.session = requests.Session()
        return one_request(local.session, url, body, profile)

    before, before_at = counter()
    started = time.time()
    outcomes: list[Outcome] = []
    with ThreadPoolExecutor(max_workers=profile.concurrency, thread_name_prefix="loadtest") as pool:
        for outcome in pool.map(task, range(profile.requests)):
            if outcome is not None:
                outcomes.append(outcome)
                if progress is not None:
                    progress(len(outcomes))
    ended = time.time()
    after, after_at = counter() if before is not None else (None, ended)
    return LoadResult(base, started, ended, outcomes, before, after, metrics_error, max(after_at - before_at, 1e-6))
