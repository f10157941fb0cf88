"""The dashboard's "What is wrong now" (open events by severity, grouped by component, each linked to its evidence)
and the node and switch pages' Health sections."""

from dataclasses import dataclass, field

from django.db.models import F
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from apps.accounts.choices import Role
from apps.health.choices import NODE_STATE_COLOURS, SEVERITY_COLOURS, SEVERITY_RANK, ComponentType, Severity
from apps.health.costs import failure_costs
from apps.health.models import HealthEvent
from apps.health.services import open_events, state_of
from apps.inventory.models import NvlinkSwitchTray

SHOWN = 50  # events on the panel; the rest are counted and a link leads to the API's list

# An evidence key → the page it links to (URL names; the pages belong to apps above this one, reached by name only).
EVIDENCE_PAGES = {
    "job": ("job-page", "job"),
    "benchmark_run": ("benchmark-run", "benchmark run"),
    "incident": ("incident-detail", "incident"),
    "deployment": ("deployment-detail", "deployment"),
}


@dataclass(frozen=True)
class EvidenceLink:
    label: str
    url: str


def evidence_links(event: HealthEvent) -> list[EvidenceLink]:
    """Links to the jobs, runs, incidents and deployments the event's observations name, newest first, each once."""
    links, seen = [], set()
    for item in reversed(event.evidence or []):
        for key, (url_name, label) in EVIDENCE_PAGES.items():
            value = item.get(key)
            if not value or (key, value) in seen:
                continue
            seen.add((key, value))
            try:
                links.append(EvidenceLink(f"{label} {str(value)[:8]}", reverse(url_name, args=[value])))
            except NoReverseMatch:
                continue  # not an id a page takes: shown in the API's evidence, not linked
    return links


def evidence_lines(event: HealthEvent) -> list[str]:
    """The newest observation's log lines (at most three), as the triage rules cited them."""
    for item in reversed(event.evidence or []):
        if item.get("lines"):
            return [str(line) for line in item["lines"][:3]]
    return []


@dataclass
class ComponentGroup:
    label: str
    url: str
    events: list = field(default_factory=list)


COOLANT_COMPONENTS = (ComponentType.COOLANT, ComponentType.LEAK_SENSOR)


def _component_url(event: HealthEvent) -> str:
    if event.component_type in COOLANT_COMPONENTS and event.node_id and event.node.rack_id:
        # A leak or coolant fault is the rack's: its page says so first and offers the trays' power-off.
        return reverse("rack-detail", args=[event.node.rack.public_id])
    if event.node_id:
        return reverse("node-detail", args=[event.node.public_id])
    if event.switch_id:
        return reverse("switch-detail", args=[event.switch.public_id])
    if event.nvlink_switch_tray_id:  # in no node: the rack it is mounted in
        return reverse("rack-detail", args=[event.nvlink_switch_tray.domain.rack.public_id])
    return ""


def wrong_now() -> dict:
    events = list(open_events().select_related("switch", "node__rack", "nvlink_switch_tray__domain__rack")[: SHOWN + 1])
    counts = {row: 0 for row in Severity.values}
    for severity in HealthEvent.objects.open().values_list("severity", flat=True):
        counts[severity] += 1
    groups: dict[str, ComponentGroup] = {}
    for event in events[:SHOWN]:
        event.links = evidence_links(event)
        event.lines = evidence_lines(event)
        group = groups.setdefault(event.component_key, ComponentGroup(event.component_label, _component_url(event)))
        group.events.append(event)
    return {
        "groups": list(groups.values()),
        "by_severity": [
            {"value": value, "label": label, "count": counts[value], "colour": SEVERITY_COLOURS[value]}
            for value, label in Severity.choices
        ],
        "open_count": sum(counts.values()),
        "more": max(0, sum(counts.values()) - SHOWN),
    }


def _section(events: list[HealthEvent], recent_cleared: list[HealthEvent], request) -> dict:
    costs = failure_costs([*events, *recent_cleared], now=timezone.now())
    for event in [*events, *recent_cleared]:
        event.cost = costs[event.pk]
    for event in events:
        event.links = evidence_links(event)
        event.lines = evidence_lines(event)
    state = state_of(events)
    return {
        "events": events,
        "cleared": recent_cleared,
        "state": state,
        "state_colour": NODE_STATE_COLOURS[state],
        "may_clear": request.user.has_role(Role.OPERATOR),
    }


CLEARED_SHOWN = 5
RECENT = 200  # a page's one read: its open events first (few), then the newest cleared ones


def _open_and_cleared(events) -> tuple[list[HealthEvent], list[HealthEvent]]:
    """One query: the open events, worst and newest first, and the last few cleared."""
    rows = list(
        events.select_related("cleared_by_user").order_by(F("cleared_at").desc(nulls_first=True), "-last_seen")[:RECENT]
    )
    opened = sorted(
        (row for row in rows if row.cleared_at is None),
        key=lambda row: (SEVERITY_RANK[row.severity], -row.last_seen.timestamp(), -row.pk),
    )
    return opened, [row for row in rows if row.cleared_at is not None][:CLEARED_SHOWN]


def node_events(node, request) -> dict:
    """The node page's health: its open events (its GPUs', NICs', cables', BMC's and its own) and the last cleared."""
    return _section(*_open_and_cleared(HealthEvent.objects.filter(node=node)), request)


def switch_events(switch, request) -> dict:
    """The switch page's health: open events on the switch, its ports and the cables to them."""
    return _section(*_open_and_cleared(HealthEvent.objects.filter(switch=switch)), request)


def rack_events(rack, request) -> dict:
    """A rack-scale rack's page: the health of its NVLink switch trays, which are in no node (a switch tray down is
    every compute tray's fault and none of theirs: their node pages do not show it). Nothing for other racks."""
    if not NvlinkSwitchTray.objects.filter(domain__rack=rack).exists():
        return {"shown": False}
    events = HealthEvent.objects.filter(nvlink_switch_tray__domain__rack=rack)
    return {"shown": True, "heading": "NVLink switch trays", **_section(*_open_and_cleared(events), request)}
