"""The one health state: producers record events on components, views read them, validations and operators clear
them. Every function here is keyword-only and takes no request (docs/health.md)."""

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from rest_framework import serializers

from apps.core import audit
from apps.core.choices import AuditAction
from apps.health.choices import SEVERITY_RANK, ClearedBy, ComponentType, NodeState, Severity, Source
from apps.health.models import HealthEvent, HealthEventQuerySet
from apps.inventory.choices import HEALTH_OF_PRESENCE, GpuHealth, GpuPresence
from apps.inventory.models import Cable, Gpu, Nic, Node, NvlinkSwitchTray, Switch, Volume

EVIDENCE_KEPT = 20  # the newest observations an event keeps; the count says how many there were in all
KIND_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,47}\Z")


@dataclass(frozen=True)
class Component:
    """What an event is about, with the node it sits in (none for a switch, its ports, switch-to-switch cables)."""

    type: str
    key: str
    label: str
    node: Node | None = None
    links: dict = field(default_factory=dict)  # the model fields that point at it: {"gpu": gpu}, …

    @classmethod
    def of(cls, thing) -> "Component":
        """The component for an inventory row: a Node, Gpu, Nic, Cable, Switch, Volume or NvlinkSwitchTray."""
        if isinstance(thing, Component):
            return thing
        if isinstance(thing, Node):
            return cls(ComponentType.NODE, f"node:{thing.pk}", thing.hostname, thing)
        if isinstance(thing, Gpu):
            return cls(ComponentType.GPU, f"gpu:{thing.pk}", str(thing), thing.node, {"gpu": thing})
        if isinstance(thing, Nic):
            return cls(ComponentType.NIC, f"nic:{thing.pk}", str(thing), thing.node, {"nic": thing})
        if isinstance(thing, Cable):
            # Its NIC end names the node; its switch end the switch and port, so the switch page shows it too.
            nic = thing.a_nic or thing.b_nic
            switch, port = (thing.a_switch, thing.a_port) if thing.a_switch_id else (thing.b_switch, thing.b_port)
            links = {"cable": thing, "nic": nic, "switch": switch, "switch_port": port if switch else ""}
            return cls(
                ComponentType.CABLE,
                f"cable:{thing.pk}",
                f"cable {thing.label or thing.public_id} ({thing})"[:200],
                nic.node if nic is not None else None,
                links,
            )
        if isinstance(thing, Switch):
            return cls(ComponentType.SWITCH, f"switch:{thing.pk}", thing.name, None, {"switch": thing})
        if isinstance(thing, Volume):
            return cls(ComponentType.VOLUME, f"volume:{thing.pk}", str(thing), thing.node, {"volume": thing})
        if isinstance(thing, NvlinkSwitchTray):  # in no node: its fault is not the domain's compute trays'
            links = {"nvlink_switch_tray": thing}
            return cls(ComponentType.NVLINK_SWITCH_TRAY, f"nvlink_switch_tray:{thing.pk}", thing.name, None, links)
        raise TypeError(f"No health component for {type(thing).__name__}.")

    @classmethod
    def switch_port(cls, switch: Switch, port: str) -> "Component":
        return cls(
            ComponentType.SWITCH_PORT,
            f"switch_port:{switch.pk}:{port}",
            f"{switch.name}:{port}",
            None,
            {"switch": switch, "switch_port": port},
        )

    @classmethod
    def bmc(cls, node: Node) -> "Component":
        return cls(ComponentType.BMC, f"bmc:{node.pk}", f"{node.hostname} BMC", node)

    @classmethod
    def coolant(cls, node: Node) -> "Component":
        """A liquid-cooled tray's coolant inlet, as its BMC reads it."""
        return cls(ComponentType.COOLANT, f"coolant:{node.pk}", f"{node.hostname} coolant", node)

    @classmethod
    def leak_sensor(cls, sensor, node: Node | None) -> "Component":
        """A rack's leak sensor (apps/inventory LeakSensor): in a compute tray, with that tray's node; in an NVLink
        switch tray, in no node (as the switch tray's own events), pointing at the switch tray."""
        links = {"nvlink_switch_tray": sensor.switch_tray} if sensor.switch_tray_id else {}
        return cls(ComponentType.LEAK_SENSOR, f"leak_sensor:{sensor.pk}", f"leak sensor {sensor.name}", node, links)


def _worse(a: str, b: str) -> str:
    return a if SEVERITY_RANK[a] <= SEVERITY_RANK[b] else b


def _check(*, source: str, kind: str, severity: str, summary: str) -> None:
    errors = {}
    if source not in Source.values:
        errors["source"] = [f"Unknown source {source!r}; one of: {', '.join(Source.values)}."]
    if not KIND_PATTERN.match(kind or ""):
        errors["kind"] = ["Use a short slug: lower-case letters, digits, dashes or underscores (e.g. xid79)."]
    if severity not in Severity.values:
        errors["severity"] = [f"Unknown severity {severity!r}; one of: {', '.join(Severity.values)}."]
    if not (summary or "").strip():
        errors["summary"] = ["Say what is wrong."]
    if errors:
        raise serializers.ValidationError(errors)


def record_event(
    *,
    component,
    source: str,
    kind: str,
    severity: str,
    summary: str,
    evidence: dict | None = None,
    at: datetime | None = None,
) -> HealthEvent:
    """Records one observation on the component: a new open event, or folded into the open one of that kind.

    A fold moves `last_seen` on, keeps the worse severity and the newest summary, and adds the evidence; the same
    observation recorded twice (equal evidence, e.g. a watch reading the same fault each minute) is counted once.
    Creation is in the audit log; folds are not (they would flood it: the count and evidence say them)."""
    _check(source=source, kind=kind, severity=severity, summary=summary)
    part = Component.of(component)
    at = at or timezone.now()
    observation = {"at": at.isoformat(), "source": source, **(evidence or {})}
    for _ in range(2):  # a parallel producer may create the event between our read and our insert: then fold into it
        try:
            with transaction.atomic():
                event = HealthEvent.objects.select_for_update().filter(component_key=part.key, kind=kind).open().first()
                if event is None:
                    event = _create(part, source, kind, severity, summary, observation, at)
                    record_inventory_health(event=event)
                    return event
                was = event.severity
                _fold(event, source, severity, summary, observation, at)
                if event.severity != was:  # a repeat changes the state only when it is worse
                    record_inventory_health(event=event)
                return event
        except IntegrityError:
            continue
    raise RuntimeError(f"Could not record {kind} on {part.label}: its open event kept changing.")


def _create(part: Component, source, kind, severity, summary, observation, at) -> HealthEvent:
    return HealthEvent.objects.create(
        component_type=part.type,
        component_key=part.key,
        component_label=part.label[:200],
        node=part.node,
        source=source,
        sources=[source],
        kind=kind,
        severity=severity,
        summary=summary.strip()[:300],
        first_seen=at,
        last_seen=at,
        evidence=[observation],
        **part.links,
    )


def _same(a: dict, b: dict) -> bool:
    return {k: v for k, v in a.items() if k != "at"} == {k: v for k, v in b.items() if k != "at"}


def _fold(event: HealthEvent, source, severity, summary, observation, at) -> None:
    seen_before = any(_same(item, observation) for item in event.evidence)
    changes = {
        "last_seen": max(event.last_seen, at),
        "severity": _worse(event.severity, severity),
        "summary": summary.strip()[:300] if at >= event.last_seen else event.summary,
        "sources": event.sources if source in event.sources else [*event.sources, source],
    }
    if not seen_before:
        changes["evidence"] = [*event.evidence, observation][-EVIDENCE_KEPT:]
        changes["count"] = F("count") + 1
    # An update, not a save: the audit log records the event's creation and clearing, not each repeat.
    HealthEvent.objects.filter(pk=event.pk).update(**changes)
    event.refresh_from_db()


def clear_event(
    *, event: HealthEvent, by: str, reason: str, user=None, validation: dict | None = None, at: datetime | None = None
) -> HealthEvent:
    """Closes an open event: a passed validation (its evidence kept) or an operator, always with a reason."""
    errors = {}
    if by not in ClearedBy.values:
        errors["by"] = [f"Cleared by one of: {', '.join(ClearedBy.values)}."]
    if not (reason or "").strip():
        errors["reason"] = ["Say why the event is cleared."]
    if errors:
        raise serializers.ValidationError(errors)
    with transaction.atomic():
        locked = HealthEvent.objects.select_for_update().get(pk=event.pk)
        if not locked.is_open:
            raise serializers.ValidationError({"event": [f"Already cleared at {locked.cleared_at.isoformat()}."]})
        locked.cleared_at = at or timezone.now()
        locked.cleared_by = by
        locked.cleared_by_user = user if getattr(user, "pk", None) else None
        locked.clear_reason = reason.strip()[:300]
        locked.clear_evidence = validation or {}
        audit.save_as(locked, AuditAction.CLEAR)  # audited as "Cleared": who cleared it, by what, why
        record_inventory_health(event=locked)
    return locked


def clear_validated(
    *,
    node: Node,
    kinds: list[str] | None = None,
    component_types: list[str] | None = None,
    validation: dict,
    reason: str,
    at: datetime | None = None,
) -> list[HealthEvent]:
    """A validation passed on the node: its open events (of these kinds or on these component types, or all) are
    cleared with its evidence."""
    events = open_events(node=node)
    if kinds is not None:
        events = events.filter(kind__in=kinds)
    if component_types is not None:
        events = events.filter(component_type__in=component_types)
    return [
        clear_event(event=event, by=ClearedBy.VALIDATION, reason=reason, validation=validation, at=at)
        for event in events
    ]


def open_events(
    *, node: Node | None = None, severity: str | None = None, source: str | None = None
) -> HealthEventQuerySet:
    """Open events, worst and newest first."""
    events = HealthEvent.objects.open().select_related("node")
    if node is not None:
        events = events.filter(node=node)
    if severity:
        events = events.filter(severity=severity)
    if source:
        events = events.filter(source=source)
    return events.worst_first()


@dataclass
class NodeHealth:
    """A node's state from its open events, and the events themselves as the reasons."""

    state: str
    events: list[HealthEvent]

    @property
    def reasons(self) -> list[str]:
        return [event.reason for event in self.events]


def state_of(events: Iterable[HealthEvent]) -> str:
    """A node's state from its open events (anything with a `severity`)."""
    severities = {event.severity for event in events}
    if severities & {Severity.CRITICAL, Severity.MAJOR}:
        return NodeState.UNHEALTHY
    if Severity.MINOR in severities:
        return NodeState.DEGRADED
    return NodeState.HEALTHY


def node_health(node: Node) -> NodeHealth:
    events = list(open_events(node=node))
    return NodeHealth(state_of(events), events)


def nodes_health(nodes: list[Node]) -> dict[int, NodeHealth]:
    """Per node id, its health: one query for all of them."""
    by_node = open_events_by_node(nodes)
    return {node.pk: NodeHealth(state_of(by_node[node.pk]), by_node[node.pk]) for node in nodes}


def open_events_by_node(nodes) -> defaultdict[int, list[HealthEvent]]:
    """Per node id, its open events worst first (none: an empty list); `nodes` a list or a queryset (a subquery)."""
    by_node = defaultdict(list)
    for event in HealthEvent.objects.open().filter(node__in=nodes).select_related("gpu").worst_first():
        by_node[event.node_id].append(event)
    return by_node


# What one open event on a GPU makes of it; the worst event wins. An info event leaves it as its presence says.
GPU_HEALTH_OF_SEVERITY = {
    Severity.CRITICAL: GpuHealth.FAILED,
    Severity.MAJOR: GpuHealth.FAILED,
    Severity.MINOR: GpuHealth.WARNING,
}
GPU_MISSING_KIND = "gpu_missing"  # the telemetry watch's: the GPU left the node's series (apps/monitoring/watch.py)


def gpu_health_of(*, presence: str, events: Iterable) -> str:
    """The one mapping from what is known of a GPU to `Gpu.health`: missing (discovery did not find it, or an open
    `gpu_missing` says so), else failed (a critical or major open event), warning (a minor one), else what its presence
    says (present → healthy, not yet seen → unknown). `events`: its open events (anything with `kind` and `severity`,
    so the data migration's historical rows do too)."""
    events = list(events)
    if presence == GpuPresence.MISSING or any(event.kind == GPU_MISSING_KIND for event in events):
        return GpuHealth.MISSING
    worst = min((event.severity for event in events), key=SEVERITY_RANK.__getitem__, default=Severity.INFO)
    return GPU_HEALTH_OF_SEVERITY.get(worst, HEALTH_OF_PRESENCE.get(presence, GpuHealth.UNKNOWN))


def record_inventory_health(*, event: HealthEvent) -> None:
    """Writes what the open events now say on the inventory rows the event touches: its node's `health_state` (the
    node's own events and its parts': GPUs, NICs, cables, BMC, …) and its GPU's `health`. Called inside the
    transaction that opened, worsened or cleared the event, so lists read a stored state (docs/health.md)."""
    if event.node_id is not None:
        # Lock the node first: two producers recording on one node at once each read the other's committed event.
        list(Node.objects.select_for_update().filter(pk=event.node_id).values_list("pk", flat=True))
        state = state_of(HealthEvent.objects.open().filter(node_id=event.node_id).only("severity"))
        Node.objects.filter(pk=event.node_id).exclude(health_state=state).update(health_state=state)
    if event.gpu_id is not None:
        presence = Gpu.objects.filter(pk=event.gpu_id).values_list("presence", flat=True).first()
        if presence is not None:
            health = gpu_health_of(presence=presence, events=_open_on_gpu(event.gpu_id))
            Gpu.objects.filter(pk=event.gpu_id).exclude(health=health).update(health=health)


def _open_on_gpu(gpu_id: int):
    return HealthEvent.objects.open().filter(gpu_id=gpu_id).only("kind", "severity")


def gpu_presence_changed(*, gpu: Gpu) -> None:
    """Before a GPU is saved with a new presence (discovery's accept, the API, an import): the health that presence
    and its open events give, saved (and audited) with it. apps/health/signals.py calls it from pre_save."""
    gpu.health = gpu_health_of(presence=gpu.presence, events=_open_on_gpu(gpu.pk) if gpu.pk else [])
