"""Maintenance windows (docs/health.md, "Maintenance windows"): time booked for people to work on a rack or a node.
While one is open automation leaves its nodes to them; a non-critical disruptive action on a node whose window opens
within the horizon (RACKPILOT_MAINTENANCE_DEFER_HOURS) is deferred into it and runs when it opens
(services.settle_deferred). The rules a window must meet live here, read by the API, the page and the admin alike."""

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q
from rest_framework import serializers

from apps.health.choices import Severity
from apps.inventory.models import Node
from apps.remediation.choices import Action
from apps.remediation.models import MaintenanceWindow

WINDOW_MAX = timedelta(days=7)  # a longer absence is a decommission or a repair, not a window
# Never deferred: a notice costs nothing, and a leak's trays go off at once whatever was booked.
NOT_DEFERRED = {Action.NOTIFY, Action.POWER_OFF_TRAYS}


def problems(
    *, rack, node, starts: datetime | None, ends: datetime | None, subject_refused: bool = False
) -> dict[str, str]:
    """What is wrong with a window, by field (empty when nothing is). `subject_refused`: the door refused the rack or
    node named (none such), so one was named all the same."""
    found = {}
    if rack is not None and node is not None:
        found["node"] = "A maintenance window is on a rack or a node, not both."
    elif rack is None and node is None and not subject_refused:
        found["rack"] = "A maintenance window is on a rack or a node: name one."
    if starts is not None and ends is not None:
        if ends <= starts:
            found["ends"] = "A window ends after it starts."
        elif ends - starts > WINDOW_MAX:
            found["ends"] = (
                f"A window lasts at most {WINDOW_MAX.days} days (this one {_span(ends - starts)}): book the rest "
                "as another."
            )
    return found


def _span(length: timedelta) -> str:
    hours = length.total_seconds() / 3600
    return f"{hours / 24:.1f} days" if hours >= 48 else f"{hours:.0f} h"


def open_window(*, node: Node, now: datetime) -> MaintenanceWindow | None:
    """The window, on the node or its rack, open at `now` (the one ending first)."""
    return _on(node).filter(starts__lte=now, ends__gt=now).order_by("ends", "pk").first()


def next_window(*, node: Node, now: datetime) -> MaintenanceWindow | None:
    """The first window on the node or its rack that opens after `now`, within the deferral horizon."""
    horizon = now + timedelta(hours=settings.RACKPILOT_MAINTENANCE_DEFER_HOURS)
    return _on(node).filter(starts__gt=now, starts__lte=horizon).order_by("starts", "pk").first()


def _on(node: Node):
    on_it = Q(node=node) | Q(rack_id=node.rack_id) if node.rack_id else Q(node=node)
    return MaintenanceWindow.objects.filter(on_it).select_related("rack", "node")


def deferrable(*, action: str, severity: str) -> bool:
    """A disruptive action for a fault below critical waits for a booked window; a critical one acts at once."""
    return action not in NOT_DEFERRED and severity != Severity.CRITICAL


def describe(window: MaintenanceWindow) -> str:
    """`the maintenance window on rack r03 from 2026-12-02T08:00+00:00 to …T12:00+00:00 (psu swap)`."""
    on = f"rack {window.rack.name}" if window.rack_id else window.node.hostname
    return (
        f"the maintenance window on {on} from {window.starts.isoformat(timespec='minutes')} to "
        f"{window.ends.isoformat(timespec='minutes')} ({window.reason})"
    )


def state(window: MaintenanceWindow, *, now: datetime) -> str:
    if now < window.starts:
        return "upcoming"
    return "open" if now < window.ends else "past"


def book(*, rack=None, node=None, starts: datetime, ends: datetime, reason: str) -> MaintenanceWindow:
    """Books a window (audited); a window that breaks a rule raises ValidationError naming the field, nothing saved."""
    found = problems(rack=rack, node=node, starts=starts, ends=ends)
    if found:
        raise serializers.ValidationError({field: [message] for field, message in found.items()})
    return MaintenanceWindow.objects.create(rack=rack, node=node, starts=starts, ends=ends, reason=reason)


def end_early(*, window: MaintenanceWindow, now: datetime) -> MaintenanceWindow:
    """Ends an open window now (audited): automation acts on its nodes again. One not open yet is deleted instead."""
    current = state(window, now=now)
    if current != "open":
        message = (
            "The window has not opened yet: delete it instead."
            if current == "upcoming"
            else "The window ended already."
        )
        raise serializers.ValidationError({"window": [message]})
    window.ends = now
    window.save(update_fields=["ends", "updated"])
    return window
