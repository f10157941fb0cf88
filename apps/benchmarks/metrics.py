"""Benchmark verdicts for Rackpilot's /metrics (registered by portal/metrics.py)."""

from django.db.models import Count

from apps.benchmarks.models import BenchmarkTest


def verdict_counts() -> dict[str, int]:
    """Every benchmark test's verdict so far, by verdict."""
    rows = BenchmarkTest.objects.order_by().values("verdict").annotate(count=Count("pk"))
    return {row["verdict"]: row["count"] for row in rows}
