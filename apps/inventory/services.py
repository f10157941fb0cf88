"""Inventory services used by pages, the API and commands."""

from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from apps.inventory import power
from apps.inventory.choices import (
    GPU_HEALTH_COLOURS,
    NODE_STATUS_COLOURS,
    GpuHealth,
    HostKeyState,
    NodeRole,
    NodeStatus,
)
from apps.inventory.models import Gpu, Node, Rack, SshHostKey


@dataclass(frozen=True)
class Tally:
    value: str
    label: str
    colour: str
    count: int


def nodes_by_status() -> list[Tally]:
    counts = dict(Node.objects.values_list("status").annotate(n=Count("id")))
    return [Tally(s.value, s.label, NODE_STATUS_COLOURS[s], counts.get(s.value, 0)) for s in NodeStatus]


def gpus_by_health() -> list[Tally]:
    counts = dict(Gpu.objects.values_list("health").annotate(n=Count("id")))
    return [Tally(h.value, h.label, GPU_HEALTH_COLOURS[h], counts.get(h.value, 0)) for h in GpuHealth]


def unhealthy_gpus(limit: int = 20):
    return (
        Gpu.objects.exclude(health=GpuHealth.HEALTHY)
        .select_related("node", "sku")
        .order_by("node__hostname", "index")[:limit]
    )


@dataclass(frozen=True)
class RackSlot:
    """One row of a rack elevation: either a node starting at this U, an occupied U, or an empty U."""

    u: int
    node: Node | None = None
    occupied: bool = False


def rack_elevation(rack: Rack) -> list[RackSlot]:
    """The rack from its top U down, each node drawn at its lowest U with its height."""
    nodes = {node.u_position: node for node in rack.nodes.filter(u_position__isnull=False)}
    covered = {u for node in nodes.values() for u in range(node.u_position, node.u_position + node.u_height)}
    slots = []
    u = rack.u_height
    while u >= 1:
        starting = next((n for n in nodes.values() if n.u_position + n.u_height - 1 == u), None)
        if starting:
            slots.append(RackSlot(u=starting.u_position, node=starting))
            u = starting.u_position - 1
            continue
        slots.append(RackSlot(u=u, occupied=u in covered))
        u -= 1
    return slots


def racks_with_power():
    """Racks with their node count and the full-load estimate against their budget (power.with_power)."""
    for rack in power.with_power(Rack.objects.select_related("site")):
        rack.estimated_load_kw = round(rack.full_load_w / 1000, 1)
        rack.power_share = rack.full_load_w / (float(rack.power_budget_kw) * 1000)
        yield rack


def node_detail_queryset():
    return Node.objects.select_related("rack__site", "gpu_sku").prefetch_related(
        "tags",
        "gpus__sku",
        "gpus__peer_nics",
        "nics__cable_as_a__b_switch",
        "nics__cable_as_b__a_switch",
        "firmware",
        "volumes__tier",
        "host_keys",
    )


def compute_nodes_missing_gpus():
    """Compute nodes that have fewer GPUs in inventory than they should."""
    return (
        Node.objects.filter(role=NodeRole.COMPUTE)
        .annotate(present=Count("gpus", filter=~Q(gpus__health=GpuHealth.MISSING)))
        .filter(present__lt=F("expected_gpu_count"))
    )


@transaction.atomic
def trust_host_key(*, key: SshHostKey, user) -> SshHostKey:
    """An admin accepts a node's host key (accounts.permissions.may_decide_host_keys): it becomes the node's only
    trusted key; earlier ones are revoked."""
    SshHostKey.objects.filter(node=key.node, state=HostKeyState.TRUSTED).exclude(pk=key.pk).update(
        state=HostKeyState.REVOKED
    )
    key.state = HostKeyState.TRUSTED
    key.approved_by = user
    key.save()
    return key


# --- drain and bulk edit ----------------------------------------------------------------------------------------


class NodeChangeRefused(Exception):
    """A drain, undrain or bulk edit refused as a whole: `errors` maps a field to its messages; nothing changed."""

    def __init__(self, errors: dict[str, list[str]]):
        super().__init__("; ".join(f"{field}: {' '.join(messages)}" for field, messages in errors.items()))
        self.errors = errors


DRAIN_REASON_MAX = 200


def drain_nodes(*, nodes, reason: str, since=None, until=None) -> list[Node]:
    """Drain the nodes with a reason, since `since` (now by default) and, if given, until `until`. Each save is
    audited under the caller's audit context. A node drained already gets the new reason and dates."""
    reason = (reason or "").strip()
    errors = {}
    if not reason:
        errors["reason"] = ["Say why the node is drained."]
    elif len(reason) > DRAIN_REASON_MAX or any(ord(char) < 32 for char in reason):
        errors["reason"] = [f"One line of at most {DRAIN_REASON_MAX} characters."]
    since = since or timezone.now()
    if until is not None and until <= since:
        errors["until"] = ["The end of the drain must come after its start."]
    nodes = list(nodes)
    if not nodes:
        errors["nodes"] = ["Choose at least one node."]
    if errors:
        raise NodeChangeRefused(errors)
    with transaction.atomic():
        for node in nodes:
            node.drained_at, node.drain_reason, node.drained_until = since, reason, until
            node.save(update_fields=["drained_at", "drain_reason", "drained_until", "updated"])
    return nodes


def undrain_nodes(*, nodes) -> list[Node]:
    """Put drained nodes back into service; nodes not drained are left alone (no audit entry)."""
    nodes = list(nodes)
    if not nodes:
        raise NodeChangeRefused({"nodes": ["Choose at least one node."]})
    with transaction.atomic():
        for node in nodes:
            if node.drained_at is None:
                continue
            node.drained_at, node.drain_reason, node.drained_until = None, "", None
            node.save(update_fields=["drained_at", "drain_reason", "drained_until", "updated"])
    return nodes


def bulk_edit_nodes(*, nodes, status: str = "", rack=None, add_tags=(), remove_tags=()) -> list[Node]:
    """Set the status and/or rack and add or remove tags on each node, through the model's own checks (the status
    transition table, rack fit). All or nothing: any node refused refuses the whole edit, naming the hosts."""
    nodes = list(nodes)
    if not nodes:
        raise NodeChangeRefused({"nodes": ["Choose at least one node."]})
    if not (status or rack or add_tags or remove_tags):
        raise NodeChangeRefused({"__all__": ["Choose something to change."]})
    errors: dict[str, list[str]] = {}
    with transaction.atomic():
        for node in nodes:
            if status:
                node.status = status
            if rack:
                if node.rack_id != rack.pk:
                    node.u_position = None  # a position in another rack means nothing in this one
                node.rack = rack
            try:
                node.full_clean(validate_unique=False)
            except ValidationError as error:
                for field, messages in error.message_dict.items():
                    errors.setdefault(field, []).extend(f"{node.hostname}: {m}" for m in messages)
                continue
            node.save()
            if add_tags:
                node.tags.add(*add_tags)
            if remove_tags:
                node.tags.remove(*remove_tags)
        if errors:
            transaction.set_rollback(True)
    if errors:
        raise NodeChangeRefused(errors)
    return nodes
