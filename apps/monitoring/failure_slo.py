"""The SLO budget a failure burned, for apps/health/costs.py (which sits below monitoring and reads it through
`register_slo_burn`): for each SLO whose nodes include the failed node, the steps it missed from the event's first
sighting to its clearing (or now), as a percent of the error budget its 30-day window allows. Counted as the SLOs
page counts (slo_counts_between: the recorded verdicts, else Prometheus, else the criterion over the samples);
telemetry that cannot be read leaves the cost "not measured"."""

from datetime import datetime

from apps.health.models import HealthEvent
from apps.monitoring import slo
from apps.monitoring.models import Slo
from apps.monitoring.services import slo_counts_between
from apps.monitoring.telemetry import TelemetryError, telemetry

BUDGET_WINDOW = "30d"


def slo_burn(events: list[HealthEvent], now: datetime) -> dict[int, list[dict]]:
    try:
        source = telemetry()
    except TelemetryError:
        return {}  # not measured
    rows = list(Slo.objects.select_related("service", "training_job", "rack"))
    hosts = {row.pk: set(row.hostnames()) for row in rows}
    burns: dict[int, list[dict]] = {}
    for event in events:
        if event.node_id is None:
            burns[event.pk] = []  # on no node (a switch): no SLO names it
            continue
        end = min(event.cleared_at or now, now)
        found = []
        for row in rows:
            if event.node.hostname not in hosts[row.pk]:
                continue
            found.append({"slo": row.name, **_burned(source, row.spec(), start=event.first_seen, end=end)})
        burns[event.pk] = found
    return burns


def _burned(source, spec: slo.SloSpec, *, start: datetime, end: datetime) -> dict:
    """{"budget_percent", "note"}: the percent, or None with the reason there is none."""
    try:
        counts = slo_counts_between(source, spec, start=start.timestamp(), end=end.timestamp())
    except TelemetryError:
        return {"budget_percent": None, "note": "its telemetry could not be read"}
    if counts is None:
        return {"budget_percent": None, "note": "open under a minute: no step judged yet"}
    judged, good = counts
    allowed = (1 - spec.compliance) * slo.WINDOWS[BUDGET_WINDOW] / slo.resolution_seconds(spec)
    if allowed <= 0:
        return {"budget_percent": None, "note": f"{judged - good} missed steps; its objective (100 %) has no budget"}
    return {"budget_percent": 100 * (judged - good) / allowed, "note": ""}
