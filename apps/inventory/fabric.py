"""Reading the cabling: what each port of a switch carries, and the path from a GPU's NIC through its leaf to the
spines (the trace an operator follows with a failing NCCL pair in hand)."""

import re
from dataclasses import dataclass, field

from django.db.models import Q

from apps.core.units import link_rate
from apps.inventory.choices import SwitchTier
from apps.inventory.models import Cable, Nic, Switch

_NUMBERED_PORT = re.compile(r"([A-Za-z/-]*?)(\d+)\Z")


@dataclass
class FarEnd:
    """The other end of a cable seen from one port: a node's NIC or another switch's port."""

    label: str
    node: object = None  # Node, for a NIC end
    nic: Nic | None = None
    switch: Switch | None = None
    port: str = ""

    @property
    def up(self) -> bool:
        return self.nic.link_up if self.nic is not None else True


@dataclass
class PortRow:
    port: str
    cable: Cable
    far: FarEnd

    @property
    def speed_gbps(self) -> int:
        return self.cable.speed_gbps


@dataclass
class SwitchPorts:
    switch: Switch
    rows: list[PortRow]
    free: int  # numbered ports of the switch with no cable

    @property
    def used(self) -> int:
        return len(self.rows)

    @property
    def down(self) -> int:
        return sum(1 for row in self.rows if not row.far.up)


def _cables():
    return Cable.objects.select_related("a_nic__node", "b_nic__node", "a_switch", "b_switch")


def _far_end(cable: Cable, *, from_a: bool) -> FarEnd:
    side = "b" if from_a else "a"
    nic = getattr(cable, f"{side}_nic")
    if nic is not None:
        return FarEnd(label=str(nic), node=nic.node, nic=nic)
    switch, port = getattr(cable, f"{side}_switch"), getattr(cable, f"{side}_port")
    return FarEnd(label=f"{switch}:{port}", switch=switch, port=port)


def port_order(port: str) -> tuple:
    """swp2 before swp10; names without a number after those with one."""
    match = _NUMBERED_PORT.match(port)
    return (match.group(1), int(match.group(2)), "") if match else ("~", 0, port)


def switch_ports(switch: Switch) -> SwitchPorts:
    rows = []
    for cable in _cables().filter(Q(a_switch=switch) | Q(b_switch=switch)):
        if cable.a_switch_id == switch.pk:
            rows.append(PortRow(cable.a_port, cable, _far_end(cable, from_a=True)))
        if cable.b_switch_id == switch.pk:
            rows.append(PortRow(cable.b_port, cable, _far_end(cable, from_a=False)))
    rows.sort(key=lambda row: port_order(row.port))
    numbered = {row.port for row in rows if _NUMBERED_PORT.match(row.port)}
    return SwitchPorts(switch=switch, rows=rows, free=max(0, switch.port_count - len(numbered)))


@dataclass
class Uplinks:
    """The cables from one switch to one switch of the next tier: ECMP members, counted and summed."""

    to: Switch
    cables: list[PortRow] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.cables)

    @property
    def gbps(self) -> int:
        return sum(row.speed_gbps for row in self.cables)


@dataclass
class Trace:
    nic: Nic
    gpus: list  # the GPUs that share the NIC's PCIe switch
    cable: Cable | None
    first_switch: Switch | None
    first_port: str
    uplinks: list[Uplinks]  # from the first switch to each switch it reaches, highest tier first
    problems: list[str]


def trace_nic(nic: Nic) -> Trace:
    """GPU → NIC → cable → leaf port → the leaf's uplinks to each spine. A NIC cabled straight to a spine (a
    management node) ends there; each gap (no cable, a link down, a leaf without uplinks) is named."""
    gpus = sorted(nic.peer_gpus.all(), key=lambda gpu: gpu.index)
    cable = _cables().filter(Q(a_nic=nic) | Q(b_nic=nic)).first()
    problems = []
    if not nic.link_up:
        problems.append(f"{nic} reports its link down.")
    if cable is None:
        problems.append(f"{nic} has no cable in the inventory.")
        return Trace(nic, gpus, None, None, "", [], problems)
    far = _far_end(cable, from_a=cable.a_nic_id == nic.pk)
    if far.switch is None:
        problems.append(f"{nic} is cabled to another NIC ({far.label}), not to a switch.")
        return Trace(nic, gpus, cable, None, "", [], problems)
    if cable.speed_gbps < nic.speed_gbps:
        problems.append(
            f"The cable runs at {link_rate(cable.speed_gbps)}, below the NIC's {link_rate(nic.speed_gbps)}."
        )
    uplinks: dict[int, Uplinks] = {}
    for row in switch_ports(far.switch).rows:
        if row.far.switch is not None:
            uplinks.setdefault(row.far.switch.pk, Uplinks(row.far.switch)).cables.append(row)
    rank = {SwitchTier.CORE: 0, SwitchTier.SPINE: 1}  # highest tier first
    ordered = sorted(uplinks.values(), key=lambda group: (rank.get(group.to.tier, 2), group.to.name))
    if far.switch.tier == "leaf" and not ordered:
        problems.append(f"{far.switch} has no uplinks in the inventory: this NIC reaches only its own rack.")
    return Trace(nic, gpus, cable, far.switch, far.port, ordered, problems)
