"""Deployment (acceptance check) verdicts for Rackpilot's /metrics (registered by portal/metrics.py)."""

from django.db.models import Count

from apps.deployments.models import Verdict


def verdict_counts() -> dict[str, int]:
    """Every acceptance check's outcome so far, by outcome."""
    rows = Verdict.objects.order_by().values("outcome").annotate(count=Count("pk"))
    return {row["outcome"]: row["count"] for row in rows}
