"""The business validation's verdicts: a load test's figures judged against the brief's four criteria (the SLOs' own
definitions, apps/monitoring/slo.py), each with its criterion, value and evidence (docs/monitoring.md).

- throughput: the service's generated tokens/s during the run, from its own token counter (vLLM's /metrics: every
  token it generated, the test's and any other traffic's, the other traffic's counted at its rate between the two
  reads: measure.run_tokens), ≥ 90 % of design. Without a readable /metrics, the tokens the test received.
- latency_p99: the p99 *time to first token* the test measured, ≤ the service's latency target (100 ms). The SLO
  judges end-to-end latency of live traffic; a load test's end-to-end time is set by the output length it asks for,
  so the test judges the part the profile does not decide, and reports end-to-end and inter-token percentiles beside.
- energy_per_mtok: the service's GPUs' energy-counter increase over the run (the telemetry interface) over the
  tokens generated, ≤ 0.5 kWh per million.
- gpu_utilisation: mean GPU utilisation of the service's GPUs over the run, ≥ 85 %.

A value that misses its target by at most WARN_MARGIN of it is a warn (one noisy run; run it again); beyond, a fail.
A figure that could not be measured is could-not-run, never a pass.
"""

from dataclasses import dataclass

from apps.monitoring.slo import CRITERIA, Objective

WARN_MARGIN = 0.05
MAX_FAILED_SHARE = 0.01  # more failed requests than this fails the throughput criterion: the service did not serve
ORDER = (Objective.THROUGHPUT, Objective.LATENCY_P99, Objective.ENERGY_PER_MTOK, Objective.GPU_UTILISATION)
RANK = {"pass": 0, "warn": 1, "could_not_run": 2, "fail": 3}


@dataclass(frozen=True)
class Figures:
    """What the run measured; None where it could not (`why` says what stopped it)."""

    throughput_pct: float | None
    ttft_p99_ms: float | None
    kwh_per_mtok: float | None
    gpu_util_pct: float | None
    failed_share: float = 0.0
    why: dict | None = None
    evidence: dict | None = None


def outcome(value: float | None, target: float, *, at_least: bool) -> str:
    if value is None:
        return "could_not_run"
    if (value >= target) if at_least else (value <= target):
        return "pass"
    near = value >= target * (1 - WARN_MARGIN) if at_least else value <= target * (1 + WARN_MARGIN)
    return "warn" if near else "fail"


def verdicts(figures: Figures, *, latency_target_ms: float) -> list[dict]:
    """One verdict per criterion, in the brief's order."""
    values = {
        Objective.THROUGHPUT: figures.throughput_pct,
        Objective.LATENCY_P99: figures.ttft_p99_ms,
        Objective.ENERGY_PER_MTOK: figures.kwh_per_mtok,
        Objective.GPU_UTILISATION: figures.gpu_util_pct,
    }
    why, evidence = figures.why or {}, figures.evidence or {}
    rows = []
    for objective in ORDER:
        criterion = CRITERIA[objective]
        target = latency_target_ms if objective == Objective.LATENCY_P99 else criterion.default_target
        value = values[objective]
        result = outcome(value, target, at_least=criterion.at_least)
        notes = list(evidence.get(objective.value, []))
        if objective == Objective.THROUGHPUT and figures.failed_share > MAX_FAILED_SHARE and value is not None:
            result = "fail"
            notes.insert(0, f"{figures.failed_share:.1%} of the requests failed")
        if value is None and objective.value in why:
            notes.insert(0, why[objective.value])
        rows.append(
            {
                "objective": objective.value,
                "label": "p99 time to first token" if objective == Objective.LATENCY_P99 else criterion.label,
                "criterion": f"{'≥' if criterion.at_least else '≤'} {target:g} {criterion.unit}",
                "target": target,
                "unit": criterion.unit,
                "value": None if value is None else round(value, 4),
                "outcome": result,
                "evidence": notes,
            }
        )
    return rows


def overall(rows: list[dict]) -> str:
    """The run's outcome: its worst criterion (a fail outranks a could-not-run: something was measured bad)."""
    return max((row["outcome"] for row in rows), key=RANK.__getitem__, default="could_not_run")
