"""Wiring of /metrics: the feature apps' figures join monitoring's collector here (feature apps do not import each
other; apps/monitoring/metrics.py says what a source is)."""

from apps.benchmarks import metrics as benchmarks
from apps.deployments import metrics as deployments
from apps.monitoring.metrics import Sample, register_source

VERDICT_SOURCES = {"benchmarks": benchmarks.verdict_counts, "deployments": deployments.verdict_counts}


@register_source
def verdict_samples():
    for source, counts in VERDICT_SOURCES.items():
        for verdict, count in counts().items():
            yield Sample("rackpilot_verdicts_total", count, {"source": source, "verdict": verdict})
