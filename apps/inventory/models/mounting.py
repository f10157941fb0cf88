"""Where devices sit in a rack's units: nodes, switches and U-mounted PDUs share one check of fit and overlap.

Nodes are full depth (an 8-GPU host fills its units front to back), so they take both faces; a switch or a PDU is
mounted on one face and may share its units with a device on the other face, as NetBox allows for half-depth devices.
"""

from dataclasses import dataclass

from django.apps import apps
from django.core.exceptions import ValidationError


@dataclass(frozen=True)
class Mounted:
    """A device over units `position`…`top` of a rack; `face` is "" for a full-depth device (both faces)."""

    label: str
    position: int
    height: int
    face: str = ""

    @property
    def top(self) -> int:
        return self.position + self.height - 1

    def clashes(self, other: "Mounted") -> bool:
        same_face = not self.face or not other.face or self.face == other.face
        return same_face and self.position <= other.top and other.position <= self.top


def rack_units(position: int | None, height: int) -> str:
    """ "U7" or "U7–U8"; "" when not placed."""
    if position is None:
        return ""
    top = position + height - 1
    return f"U{position}" if top == position else f"U{position}–U{top}"


def check_mounting(rack, device: Mounted, others: list[Mounted], *, field: str) -> None:
    """Refuses a device that does not fit in the rack's height or overlaps another on the same face, naming `field`."""
    units = rack_units(device.position, device.height)
    if device.top > rack.u_height:
        raise ValidationError({field: f"{units} does not fit in {rack} ({rack.u_height}U)."})
    for other in others:
        if device.clashes(other):
            where = f" ({other.face})" if other.face else ""
            raise ValidationError({field: f"{units} overlaps {other.label} at U{other.position}{where}."})


# What else takes units: (model, its path to the rack, its face field or None for a full-depth tray).
_MOUNTED_BESIDES_NODES = (
    ("Switch", "rack_id", "face"),
    ("Pdu", "rack_id", "face"),
    ("NvlinkSwitchTray", "domain__rack_id", None),
    ("PowerShelf", "rack_id", None),
)


def mounted_besides_nodes(rack_id: int, *, exclude=None) -> list[Mounted]:
    """The switches, U-mounted PDUs and rack-scale trays placed in a rack, but `exclude` (the device being
    checked)."""
    found = []
    for model_name, rack_path, face in _MOUNTED_BESIDES_NODES:
        model = apps.get_model("inventory", model_name)
        rows = model.objects.filter(**{rack_path: rack_id, "position__isnull": False}).order_by()
        if exclude is not None and isinstance(exclude, model) and exclude.pk:
            rows = rows.exclude(pk=exclude.pk)
        found += [Mounted(*row) for row in rows.values_list("name", "position", "u_height", *([face] if face else []))]
    return found


def mounted_nodes(rack_id: int, *, exclude=None) -> list[Mounted]:
    node_model = apps.get_model("inventory", "Node")
    rows = node_model.objects.filter(rack_id=rack_id, u_position__isnull=False).order_by()
    if exclude is not None and isinstance(exclude, node_model) and exclude.pk:
        rows = rows.exclude(pk=exclude.pk)
    return [Mounted(*row) for row in rows.values_list("hostname", "u_position", "u_height")]
