"""Business SLOs: the brief's four criteria as data, judged at each evaluation step, with error budgets and burn rates.

An SLO says: over a rolling window, at least `objective` of the evaluation steps meet the criterion (tokens/s at or
above 90 % of design, p99 at or below 100 ms, ≤ 0.5 kWh per million tokens, mean GPU utilisation at or above 85 %).
The same criterion is written twice from one definition: as PromQL for Prometheus's recording and alerting rules
(`rules`), and as Python over raw samples for the embedded wiring, which has no Prometheus (`judge_*`). Both read the
real metric names: vLLM's token counters and latency histogram, dcgm-exporter's utilisation and energy counter.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db import models


class Objective(models.TextChoices):
    THROUGHPUT = "throughput", "Throughput (% of design tokens/s)"
    LATENCY_P99 = "latency_p99", "p99 latency (ms)"
    ENERGY_PER_MTOK = "energy_per_mtok", "Energy per million tokens (kWh)"
    GPU_UTILISATION = "gpu_utilisation", "Mean GPU utilisation (%)"


class ScopeKind(models.TextChoices):
    SERVICE = "service", "Inference service"
    TRAINING_JOB = "training_job", "Training job"
    RACK = "rack", "Rack"
    CLUSTER = "cluster", "Cluster"


# Labels Rackpilot's scrape targets carry (telemetry's file-based service discovery writes them).
SERVICE_LABEL = "service"
HOST_LABEL = "Hostname"  # dcgm-exporter's own

WINDOWS = {"1h": 3_600, "24h": 86_400, "7d": 604_800, "30d": 2_592_000}
# Multi-window, multi-burn-rate alerts for a 30-day budget (Google's SRE workbook, "Alerting on SLOs"): fire when
# both the long and the short window burn faster than the rate; the short one makes the alert stop soon after a fix.
BURN_ALERTS = (
    ("1h", "5m", 14.4, "page"),
    ("6h", "30m", 6.0, "page"),
    ("24h", "2h", 3.0, "ticket"),
    ("3d", "6h", 1.0, "ticket"),
)
RATE_WINDOW = "5m"  # tokens/s and p99 are rates over this much of the counters
ENERGY_WINDOW = "1h"  # energy per token is noisy over minutes: judged per hour
MJ_PER_KWH = 3.6e9  # dcgm-exporter's DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counts millijoules


@dataclass(frozen=True)
class Criterion:
    label: str
    unit: str
    at_least: bool  # True: the value must be ≥ target; False: ≤ target
    default_target: float
    bounds: tuple[float, float]
    scopes: frozenset[str]
    help: str


CRITERIA = {
    Objective.THROUGHPUT: Criterion(
        "Throughput",
        "% of design tokens/s",
        True,
        90.0,
        (1.0, 100.0),
        frozenset({ScopeKind.SERVICE}),
        "generated tokens/s over 5 min against the service's design tokens/s",
    ),
    Objective.LATENCY_P99: Criterion(
        "p99 latency",
        "ms",
        False,
        100.0,
        (1.0, 600_000.0),
        frozenset({ScopeKind.SERVICE}),
        "99th percentile of end-to-end request latency over 5 min, from vLLM's histogram",
    ),
    Objective.ENERGY_PER_MTOK: Criterion(
        "Energy per million tokens",
        "kWh",
        False,
        0.5,
        (0.001, 100.0),
        frozenset({ScopeKind.SERVICE}),
        "the service's GPUs' energy over an hour divided by the tokens they generated",
    ),
    Objective.GPU_UTILISATION: Criterion(
        "Mean GPU utilisation",
        "%",
        True,
        85.0,
        (1.0, 100.0),
        frozenset({ScopeKind.SERVICE, ScopeKind.TRAINING_JOB, ScopeKind.RACK, ScopeKind.CLUSTER}),
        "mean DCGM_FI_DEV_GPU_UTIL over the scope's GPUs",
    ),
}


@dataclass(frozen=True)
class SloSpec:
    """What an SLO row says, without the database: what the rules and the judges need."""

    name: str
    objective: str
    target: float
    compliance: float  # e.g. 0.99: the share of steps that must meet the criterion over the window
    hosts: tuple[str, ...] = ()
    service: str = ""
    design_tokens_per_second: float = 0.0

    @property
    def criterion(self) -> Criterion:
        return CRITERIA[Objective(self.objective)]


def counter_increase(points: list[tuple[float, float]]) -> float:
    """How much a counter grew over its samples; a drop is a reset (the process restarted) and counts from zero."""
    total = 0.0
    for (_, before), (_, after) in zip(points, points[1:], strict=False):
        total += after - before if after >= before else after
    return total


# --- PromQL --------------------------------------------------------------------------------------------------------


def _regex_alternatives(values: Sequence[str]) -> str:
    # Host names are letters, digits, dashes and dots: only the dot needs escaping, twice (PromQL string, then RE2).
    return "|".join(value.replace(".", "\\\\.") for value in values)


def _service_selector(spec: SloSpec) -> str:
    return f'{{{SERVICE_LABEL}="{spec.service}"}}'


def _host_selector(spec: SloSpec) -> str:
    return f'{{{HOST_LABEL}=~"{_regex_alternatives(spec.hosts)}"}}' if spec.hosts else ""


def value_expression(spec: SloSpec) -> str:
    """PromQL for the SLI's value at each step, in the criterion's unit."""
    objective = Objective(spec.objective)
    if objective == Objective.THROUGHPUT:
        rate = f"sum(rate(vllm:generation_tokens_total{_service_selector(spec)}[{RATE_WINDOW}]))"
        return f"100 * {rate} / {spec.design_tokens_per_second:g}"
    if objective == Objective.LATENCY_P99:
        buckets = f"rate(vllm:e2e_request_latency_seconds_bucket{_service_selector(spec)}[{RATE_WINDOW}])"
        return f"1000 * histogram_quantile(0.99, sum by (le) ({buckets}))"
    if objective == Objective.ENERGY_PER_MTOK:
        energy = f"sum(increase(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{_host_selector(spec)}[{ENERGY_WINDOW}]))"
        tokens = f"sum(increase(vllm:generation_tokens_total{_service_selector(spec)}[{ENERGY_WINDOW}]))"
        return f"({energy} / {MJ_PER_KWH:g}) / ({tokens} / 1e6)"
    return f"avg(DCGM_FI_DEV_GPU_UTIL{_host_selector(spec)})"


def _warm_guard(spec: SloSpec) -> str:
    """Steps whose rate window reaches back before the counter existed are not judged: Prometheus's rate()
    extrapolates a young counter's first minutes far below the truth, and a new or restarted service would spend its
    budget on that."""
    objective = Objective(spec.objective)
    if objective == Objective.GPU_UTILISATION:
        return ""  # a gauge: its value is its value
    window = ENERGY_WINDOW if objective == Objective.ENERGY_PER_MTOK else RATE_WINDOW
    return f" and on() (count(vllm:generation_tokens_total{_service_selector(spec)} offset {window}) > 0)"


def good_expression(spec: SloSpec) -> str:
    """PromQL that is 1 at a step meeting the criterion, 0 at one missing it, and absent where nothing is judged."""
    comparison = ">=" if spec.criterion.at_least else "<="
    return f"(({value_expression(spec)}) {comparison} bool {spec.target:g}){_warm_guard(spec)}"


def rules(specs: Sequence[SloSpec]) -> dict:
    """Prometheus rule groups for the SLOs: the SLI, burn rates per window, and the burn-rate alerts."""
    windows = sorted({w for long, short, _, _ in BURN_ALERTS for w in (long, short)} | set(WINDOWS), key=_seconds)
    recording, alerting = [], []
    for spec in specs:
        labels = {"slo": spec.name, "objective": str(spec.objective)}
        recording.append({"record": "rackpilot:slo_good", "expr": good_expression(spec), "labels": labels})
        # The SLI's value where it is judged: the SLOs page's latest value reads it instead of the SLI's series.
        value = f"({value_expression(spec)}){_warm_guard(spec)}"
        recording.append({"record": "rackpilot:slo_value", "expr": value, "labels": labels})
        budget = 1 - spec.compliance
        for window in windows:
            recording.append(
                {
                    "record": f"rackpilot:slo_burn_rate{window}",
                    "expr": f'(1 - avg_over_time(rackpilot:slo_good{{slo="{spec.name}"}}[{window}])) / {budget:g}',
                    "labels": labels,
                }
            )
        for long, short, rate, severity in BURN_ALERTS:
            burning = " and ".join(f'rackpilot:slo_burn_rate{w}{{slo="{spec.name}"}} > {rate:g}' for w in (long, short))
            alerting.append(
                {
                    "alert": "RackpilotSloBurnRate",
                    "expr": burning,
                    "labels": {**labels, "severity": severity, "burn_window": long},
                    "annotations": {
                        "summary": f"SLO {spec.name} burns its error budget {rate:g}x too fast ({long} and {short})",
                        "description": f"{spec.criterion.label}: {spec.criterion.help}.",
                    },
                }
            )
    return {
        "groups": [
            {"name": "rackpilot-slo-recording", "interval": "1m", "rules": recording},
            {"name": "rackpilot-slo-alerts", "rules": alerting},
        ]
    }


def _seconds(window: str) -> int:
    return int(window[:-1]) * {"m": 60, "h": 3_600, "d": 86_400}[window[-1]]


# --- the same criteria over raw samples (the embedded wiring) -------------------------------------------------------

Samples = Sequence[tuple[float, float]]  # (unix time, value), oldest first


def meets(spec: SloSpec, value: float | None) -> bool | None:
    """Whether one step's value meets the criterion; None when there is nothing to judge (no traffic, no data)."""
    if value is None or math.isnan(value):
        return None
    return value >= spec.target if spec.criterion.at_least else value <= spec.target


@dataclass(frozen=True)
class Energy:
    """Energy per million generated tokens: amortised counts every joule, active only those of steps with traffic."""

    kwh: float
    tokens: float
    amortised_kwh_per_mtok: float | None
    active_kwh_per_mtok: float | None


def energy_per_million_tokens(energy_mj: Sequence[Samples], tokens: Samples) -> Energy:
    """From each GPU's energy counter (mJ) and the service's token counter, sampled at the same steps."""
    step_tokens = [_step_increase(a, b) for a, b in zip(tokens, tokens[1:], strict=False)]
    step_energy = [0.0] * len(step_tokens)
    for gpu in energy_mj:
        for index, (a, b) in enumerate(zip(gpu, gpu[1:], strict=False)):
            if index < len(step_energy):
                step_energy[index] += _step_increase(a, b)
    total_tokens, total_kwh = sum(step_tokens), sum(step_energy) / MJ_PER_KWH
    active_kwh = sum(e for e, t in zip(step_energy, step_tokens, strict=True) if t > 0) / MJ_PER_KWH
    per_mtok = (lambda kwh: kwh / (total_tokens / 1e6)) if total_tokens > 0 else (lambda kwh: None)
    return Energy(total_kwh, total_tokens, per_mtok(total_kwh), per_mtok(active_kwh))


def _step_increase(a: tuple[float, float], b: tuple[float, float]) -> float:
    return counter_increase([a, b])


@dataclass(frozen=True)
class Budget:
    """An SLO over one window: how many steps were judged and met, and what that leaves of the error budget."""

    window: str
    judged: int
    good: int
    no_data: int
    compliance: float | None  # share of judged steps that met the criterion
    budget_remaining: float | None  # 1 = untouched, 0 = spent (never below: an overspend is `budget_spent` past 1)
    burn_rate: float | None  # 1 = spending exactly the budget over the window
    met: bool | None = field(default=None)
    budget_spent: float | None = field(default=None)  # the budget's multiples spent: 1 = all of it, 6.7 = 6.7x over

    @property
    def exhausted(self) -> bool:
        return self.budget_spent is not None and self.budget_spent >= 1

    @property
    def budget_text(self) -> str:
        """The budget left in words: "42 % left", or "exhausted, 6.7x over" (a raw -567 % explains nothing)."""
        if self.budget_spent is None:
            return "no data"
        if self.budget_spent > 1:
            return f"exhausted, {self.budget_spent:.1f}\u00d7 over"
        if self.exhausted:
            return "exhausted"
        return f"{100 * self.budget_remaining:.0f} % left"


def budget(spec: SloSpec, window: str, verdicts: Sequence[bool | None]) -> Budget:
    """The window's budget from per-step verdicts (`meets`). Steps without data are counted apart, not as good."""
    judged = [v for v in verdicts if v is not None]
    return budget_from_counts(spec, window, judged=len(judged), good=sum(judged), steps=len(verdicts))


def budget_from_counts(spec: SloSpec, window: str, *, judged: int, good: int, steps: int) -> Budget:
    """The same from counts: `steps` evaluation steps, `judged` of them with something to judge, `good` met."""
    no_data = max(steps - judged, 0)
    if not judged:
        return Budget(window, 0, 0, no_data, None, None, None)
    compliance = good / judged
    allowed = 1 - spec.compliance
    burn = (1 - compliance) / allowed if allowed > 0 else (math.inf if compliance < 1 else 0.0)
    # The budget left is bounded to [0, 1]; past its end, what was spent says by how much (the burn rate over the
    # window is the budget's multiples spent in it).
    remaining = min(max(1 - burn, 0.0), 1.0)
    return Budget(window, judged, good, no_data, compliance, remaining, burn, compliance >= spec.compliance, burn)


def resolution_seconds(spec: SloSpec) -> int:
    """How often the criterion is judged: every minute (the rules' interval), energy per token every hour."""
    return _seconds(ENERGY_WINDOW) if Objective(spec.objective) == Objective.ENERGY_PER_MTOK else 60


def burn_alerts(spec: SloSpec, verdicts_at: dict[str, Sequence[bool | None]]) -> list[dict]:
    """The multi-window alerts that would fire, given the per-step verdicts of each alert window (newest last)."""
    firing = []
    for long, short, rate, severity in BURN_ALERTS:
        burns = [budget(spec, w, verdicts_at.get(w, ())).burn_rate for w in (long, short)]
        if all(b is not None and b > rate for b in burns):
            firing.append({"window": long, "short_window": short, "burn_rate": burns[0], "severity": severity})
    return firing
