"""Inventory services used by pages, the API and commands."""

from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, ExpressionWrapper, F, FloatField
from django.urls import reverse
from django.utils import timezone

from apps.inventory import power
from apps.inventory.census import CensusNode, gpu_census
from apps.inventory.choices import (
    GPU_HEALTH_COLOURS,
    NODE_STATUS_COLOURS,
    GpuHealth,
    HostKeyState,
    NodeStatus,
    RackFace,
    RackSide,
)
from apps.inventory.models import Gpu, Node, NvlinkSwitchTray, Pdu, PowerShelf, Rack, SshHostKey, Switch
from apps.inventory.models.mounting import rack_units as units_label


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
    counts = gpu_census().by_health
    return [Tally(h.value, h.label, GPU_HEALTH_COLOURS[h], counts[h.value]) for h in GpuHealth]


def unhealthy_gpus(limit: int = 20):
    counts = gpu_census().by_health
    if counts.total() == counts[GpuHealth.HEALTHY]:
        return Gpu.objects.none()  # the census says so: no need to look
    return (
        Gpu.objects.exclude(health=GpuHealth.HEALTHY)
        .select_related("node", "sku")
        .order_by("node__hostname", "index")[:limit]
    )


@dataclass(frozen=True)
class RackDevice:
    """A device drawn in a rack elevation: a node (full depth, on both faces), a switch, a U-mounted PDU, or a
    rack-scale system's NVLink switch tray or power shelf (full depth)."""

    kind: str  # "node", "switch", "pdu", "switch-tray" or "power-shelf": the CSS class and what the link opens
    obj: Node | Switch | Pdu | NvlinkSwitchTray | PowerShelf
    position: int
    height: int
    face: str  # "" for full depth
    url: str
    colour: str
    title: str

    @property
    def top(self) -> int:
        return self.position + self.height - 1


@dataclass(frozen=True)
class RackSlot:
    """One row of a face of a rack elevation: a device drawn from its top U down to `u` (its lowest), or an empty U."""

    u: int
    device: RackDevice | None = None

    @property
    def height(self) -> int:
        return self.device.height if self.device else 1


@dataclass(frozen=True)
class Elevation:
    """A rack's front and rear faces from the top U down, and the vertical (0U) PDUs on each side of the rear."""

    rack: Rack
    front: list[RackSlot]
    rear: list[RackSlot]
    rear_left: list[Pdu]
    rear_right: list[Pdu]


def _face_slots(u_height: int, devices: list[RackDevice]) -> list[RackSlot]:
    by_top = {}
    for device in sorted(devices, key=lambda d: d.position):
        by_top.setdefault(device.top, device)  # overlapping data (saved before checks existed): the lowest is drawn
    slots, u = [], u_height
    while u >= 1:
        device = by_top.get(u)
        if device is not None:
            slots.append(RackSlot(u=device.position, device=device))
            u = device.position - 1
            continue
        if not any(d.position <= u <= d.top for d in devices):
            slots.append(RackSlot(u=u))
        u -= 1
    return slots


def _node_device(node: Node) -> RackDevice:
    drained = f" · drained: {node.drain_reason}" if node.is_drained else ""
    off = " · powered off through its BMC" if node.is_powered_off else ""
    return RackDevice(
        "node", node, node.u_position, node.u_height, "", reverse("node-detail", args=[node.public_id]),
        "off" if node.is_powered_off else node.status_colour,  # off: it draws nothing, whatever its status says
        f"{node.hostname} · {node.get_status_display()}{drained}{off} · {node.rack_units}",
    )  # fmt: skip


def _switch_device(switch: Switch) -> RackDevice:
    return RackDevice(
        "switch", switch, switch.position, switch.u_height, switch.face,
        reverse("switch-detail", args=[switch.public_id]), "switch",
        f"{switch.name} · {switch.get_tier_display()} plane {switch.plane} · {switch.rack_units} {switch.face}",
    )  # fmt: skip


def _tray_device(kind: str, tray: NvlinkSwitchTray | PowerShelf, what: str) -> RackDevice:
    rack = tray.domain.rack if kind == "switch-tray" else tray.rack
    url = reverse("rack-detail", args=[rack.public_id]) + "#rack-scale"
    title = f"{tray.name} · {what} · {units_label(tray.position, tray.u_height)}"
    return RackDevice(kind, tray, tray.position, tray.u_height, "", url, kind, title)


def _pdu_device(pdu: Pdu) -> RackDevice:
    return RackDevice(
        "pdu", pdu, pdu.position or 0, pdu.u_height, pdu.face, reverse("pdu-detail", args=[pdu.public_id]), "pdu",
        f"{pdu.name} · feed {pdu.feed} · {pdu.capacity_w} W · {pdu.mounting}",
    )  # fmt: skip


def rack_elevations(racks: list[Rack]) -> dict[int, Elevation]:
    """Each rack's elevation, by rack id: five queries whatever the number of racks."""
    ids = [rack.pk for rack in racks]
    placed: dict[int, list[RackDevice]] = {pk: [] for pk in ids}
    zero_u: dict[int, list[Pdu]] = {pk: [] for pk in ids}
    for node in Node.objects.filter(rack_id__in=ids, u_position__isnull=False).order_by():
        placed[node.rack_id].append(_node_device(node))
    for switch in Switch.objects.filter(rack_id__in=ids, position__isnull=False).order_by():
        placed[switch.rack_id].append(_switch_device(switch))
    for tray in NvlinkSwitchTray.objects.filter(domain__rack_id__in=ids, position__isnull=False).select_related(
        "domain__rack"
    ):
        placed[tray.domain.rack_id].append(_tray_device("switch-tray", tray, f"NVLink switch tray {tray.slot}"))
    for shelf in PowerShelf.objects.filter(rack_id__in=ids, position__isnull=False).select_related("rack"):
        placed[shelf.rack_id].append(_tray_device("power-shelf", shelf, f"power shelf · {shelf.capacity_w} W"))
    for pdu in Pdu.objects.filter(rack_id__in=ids).order_by("feed", "name"):
        if pdu.zero_u:
            zero_u[pdu.rack_id].append(pdu)
        else:
            placed[pdu.rack_id].append(_pdu_device(pdu))
    elevations = {}
    for rack in racks:
        devices = placed[rack.pk]
        faces = {
            face: _face_slots(rack.u_height, [d for d in devices if d.face in ("", face)]) for face in RackFace.values
        }
        pdus = zero_u[rack.pk]
        elevations[rack.pk] = Elevation(
            rack,
            front=faces[RackFace.FRONT],
            rear=faces[RackFace.REAR],
            rear_left=[p for p in pdus if p.side == RackSide.LEFT],
            rear_right=[p for p in pdus if p.side == RackSide.RIGHT],
        )
    return elevations


def rack_elevation(rack: Rack) -> Elevation:
    return rack_elevations([rack])[rack.pk]


def most_loaded_racks(limit: int) -> tuple[list[Rack], int]:
    """Racks with their node count and full-load estimate against their budget (power.with_power) — all of them in
    their usual order where there are `limit` or fewer, else the `limit` most loaded against their budget — and how
    many racks there are. The database sorts and cuts: a fleet has hundreds of racks."""
    count = Rack.objects.count()
    racks = power.with_power(Rack.objects.select_related("site"))
    if count > limit:
        share = ExpressionWrapper(F("full_load_w") / (F("power_budget_kw") * 1000), output_field=FloatField())
        racks = racks.alias(load_share=share).order_by("-load_share", "name")[:limit]
    shown = list(racks)
    for rack in shown:
        rack.estimated_load_kw = round(rack.full_load_w / 1000, 1)
        rack.power_share = rack.full_load_w / (float(rack.power_budget_kw) * 1000)
    return shown, count


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


def compute_nodes_missing_gpus() -> list[CensusNode]:
    """Compute nodes that have fewer GPUs in inventory than they should."""
    return gpu_census().short_of_gpus()


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


# Checks that apps above the inventory register from their AppConfig.ready(): node -> why it may not go back into
# service ("" when it may). Remediation's: a node in repair returns through its validation, not by hand.
UNDRAIN_GUARDS: list = []


def register_undrain_guard(guard) -> None:
    if guard not in UNDRAIN_GUARDS:
        UNDRAIN_GUARDS.append(guard)


def undrain_nodes(*, nodes) -> list[Node]:
    """Put drained nodes back into service; nodes not drained are left alone (no audit entry). All or nothing: a
    node a guard refuses (UNDRAIN_GUARDS) refuses the whole undrain, naming why."""
    nodes = list(nodes)
    if not nodes:
        raise NodeChangeRefused({"nodes": ["Choose at least one node."]})
    refusals = [
        why for node in nodes if node.drained_at is not None for guard in UNDRAIN_GUARDS if (why := guard(node))
    ]
    if refusals:
        raise NodeChangeRefused({"nodes": refusals})
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
