"""The demo cluster: the design brief's case study, and the same shape at any size for benchmarks.

32 compute nodes x 8 H200 across 4 racks; each node has 8 data NICs (400G RoCE, 4 per plane) and a management NIC.
A shape may add rack-scale racks beside them: each a whole GB200 NVL72 (apps/inventory/catalogue.RACK_SYSTEMS), built
by _RackScaleLoader below.
Each rack has one leaf per plane; every leaf reaches every spine of its plane with as much bandwidth as it takes
from its nodes (non-blocking). Three management nodes hang off the spines at 400G. A cluster too big for two tiers
(past 124 racks of 8) becomes three: pods of 64 racks, each with its own spines, joined by a core (super-spine) tier,
non-blocking at every tier; the management nodes then hang off the core. One node (gpu017) is left one
BIOS version behind the rest, as in any real fleet.

Loading is idempotent: rows are keyed by their natural keys and only missing ones are created (in bulk).
"""

import math
import uuid
from dataclasses import dataclass
from decimal import Decimal

from django.db import transaction
from django.db.models import Q

from apps.core.choices import Transport
from apps.inventory.catalogue import RACK_SYSTEMS, sync_gpu_skus
from apps.inventory.choices import (
    CableMedium,
    CoolantLoopKind,
    FirmwareComponent,
    GpuHealth,
    GpuPresence,
    NicPurpose,
    NicTransport,
    NodeRole,
    NodeStatus,
    PduFeed,
    Plane,
    RackFace,
    RackSide,
    StorageTierKind,
    SwitchTier,
)
from apps.inventory.models import (
    Cable,
    CoolantLoop,
    Firmware,
    Gpu,
    GpuSku,
    ImexDomain,
    LeakSensor,
    Nic,
    Node,
    NvlinkDomain,
    NvlinkPartition,
    NvlinkSwitchTray,
    Pdu,
    PowerShelf,
    Rack,
    Site,
    StorageTier,
    Switch,
    Tag,
    Volume,
)

BIOS_BASELINE = "2.4.1"
BIOS_BEHIND = "2.3.5"
BMC_VERSION = "7.10.30.00"
VBIOS_VERSION = "96.00.A5.00.1A"
NIC_FIRMWARE = "28.41.1000"
DRIFTED_NODE = 17

# Where an HGX H200 board puts its GPUs on the PCIe bus; two GPUs and two NICs share each PCIe switch.
GPU_BUS_IDS = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"]
NIC_BUS_IDS = ["1b", "2c", "3c", "5f", "9c", "ad", "bc", "dd"]
NODE_U_HEIGHT = 4
COMPUTE_RACK_U, NETWORK_RACK_U = 48, 42
RDMA_PRIORITY = 3


SWITCH_PORTS = 128  # Spectrum-4 SN5600: 64 × 800G, split into 128 × 400G
# The out-of-band network as the demo draws it: a management switch (mgmt-sw01, …) for each this many compute nodes
# (the first also serves the management nodes), its access layer left out.
NODES_PER_MANAGEMENT_SWITCH = 4_000
RAIL_NICS_PER_PLANE = 4  # eight data NICs per node, alternating planes A and B
MANAGEMENT_SPINE_PORTS = 4  # kept free at the top of spine-x1 (core-x1 in three tiers) for the management nodes
FABRIC_PORTS = SWITCH_PORTS - MANAGEMENT_SPINE_PORTS  # what a spine (two tiers) or a core (three) gives the fabric
RACKS_PER_POD = SWITCH_PORTS // 2  # a pod's spine: one port down to each of its leaves, as many up to the core


@dataclass(frozen=True)
class ClusterShape:
    """How many nodes and racks, and the fabric that follows from them: two tiers (leaf, spine) while one layer of
    spines can take every leaf's uplinks, else three (pods of racks with their own spines, and a core)."""

    compute_nodes: int = 32
    nodes_per_rack: int = 8
    spines_per_plane: int | None = None  # None: the fewest (a power of two) that keep the fabric non-blocking
    management_nodes: int = 3
    site_slug: str = "demo-dc"
    rack_scale_racks: int = 0  # whole GB200 NVL72 racks (nvl01, …) beside the H200 racks

    def __post_init__(self):
        if self.leaf_downlinks > SWITCH_PORTS // 2:
            raise ValueError(
                f"nodes_per_rack {self.nodes_per_rack}: a {SWITCH_PORTS}-port leaf is non-blocking for at most "
                f"{SWITCH_PORTS // 2 // RAIL_NICS_PER_PLANE} nodes ({RAIL_NICS_PER_PLANE} NICs per plane each)."
            )
        if self.spines_per_plane and self.racks * self.leaf_downlinks / self.spines_per_plane > FABRIC_PORTS:
            raise ValueError(
                f"spines_per_plane {self.spines_per_plane}: too few spines for {self.racks} racks "
                f"(each spine gives the leaves at most {FABRIC_PORTS} ports)."
            )
        if self.rack_scale_racks and self.three_tier and self.rack_scale_spine_ports > SWITCH_PORTS // 2:
            raise ValueError(
                f"rack_scale_racks {self.rack_scale_racks}: the NVL72 racks' pod has {self.spines} spines a plane of "
                f"{SWITCH_PORTS // 2} ports down; these racks would need {self.rack_scale_spine_ports} on each."
            )
        if self.rack_scale_racks and not self.three_tier and self.rack_scale_spine_ports > FABRIC_PORTS:
            raise ValueError(
                f"rack_scale_racks {self.rack_scale_racks}: the spines have {FABRIC_PORTS} ports for the leaves; "
                f"these racks would need {self.rack_scale_spine_ports}."
            )
        if self.fabric_pods > FABRIC_PORTS:
            limit = FABRIC_PORTS * RACKS_PER_POD * self.nodes_per_rack
            raise ValueError(
                f"compute_nodes {self.compute_nodes}: a three-tier fabric of {SWITCH_PORTS}-port switches holds at "
                f"most {FABRIC_PORTS} pods of {RACKS_PER_POD} racks, {limit:,} nodes at {self.nodes_per_rack} per rack."
            )

    @property
    def rack_scale_spine_ports(self) -> int:
        """The spine ports (a plane's, each spine) the NVL72 racks' leaves take: in two tiers after the H200 racks'
        leaves, in three on the spines of the NVL72 racks' own pod."""
        per_tray_rack = -(-NVL72.compute_trays * TRAY_NICS_PER_PLANE // self.spines)
        h200 = 0 if self.three_tier else self.racks * -(-self.leaf_downlinks // self.spines)
        return h200 + self.rack_scale_racks * per_tray_rack

    @property
    def fabric_pods(self) -> int:
        """The pods the cores join: the H200 racks' and, in three tiers, one more of the NVL72 racks (its leaves
        have 36 uplinks a plane, not the H200 leaves' 32, so they do not share a pod's spines)."""
        return self.pods + (1 if self.three_tier and self.rack_scale_racks else 0)

    @property
    def racks(self) -> int:
        return -(-self.compute_nodes // self.nodes_per_rack)

    @property
    def leaf_downlinks(self) -> int:
        return self.nodes_per_rack * RAIL_NICS_PER_PLANE

    @property
    def three_tier(self) -> bool:
        """Past what one layer of spines can take in (each leaf's uplinks spread over them): a core joins pods."""
        return not self.spines_per_plane and self.racks * self.leaf_downlinks / self._two_tier_spines() > FABRIC_PORTS

    @property
    def racks_per_pod(self) -> int:
        return RACKS_PER_POD if self.three_tier else self.racks

    @property
    def pods(self) -> int:
        return -(-self.racks // self.racks_per_pod)

    @property
    def spines(self) -> int:
        """Spines per plane in two tiers; per pod and plane in three (one per leaf uplink)."""
        if self.spines_per_plane:
            return self.spines_per_plane
        return self.leaf_downlinks if self.three_tier else self._two_tier_spines()

    def _two_tier_spines(self) -> int:
        spines = 2
        # Each leaf has as many uplinks as downlinks, spread evenly over the plane's spines.
        while spines < self.leaf_downlinks and self.racks * self.leaf_downlinks / spines > FABRIC_PORTS:
            spines *= 2
        return spines

    @property
    def spine_uplinks(self) -> int:
        """In three tiers, each spine has one uplink to the core per leaf it can serve: as much up as down."""
        return self.racks_per_pod * self.leaf_downlinks // self.spines if self.three_tier else 0

    @property
    def core_columns(self) -> int:
        """A column is one uplink position of a pod's spines (spine j, uplink u); every pod has each column, and a
        core takes a column from every pod, so traffic between any two pods has a path through every core."""
        return self.spines * self.spine_uplinks

    @property
    def columns_per_core(self) -> int:
        return FABRIC_PORTS // self.fabric_pods if self.three_tier else 0

    @property
    def cores(self) -> int:
        """Core switches per plane (0 in two tiers)."""
        return -(-self.core_columns // self.columns_per_core) if self.three_tier else 0


DEMO = ClusterShape()


def compute_hostname(number: int) -> str:
    return f"gpu{number:03d}"


def _gpu_uuid(hostname: str, index: int) -> str:
    return "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{hostname}.gpu{index}.rackpilot.demo"))


def management_switch_name(number: int) -> str:
    return f"mgmt-sw{number:02d}"


def _mac(number: int, port: int) -> str:
    """The MAC of a numbered NIC: 0c:42:a1 and the number, then the port; numbers past 16 bits carry into the third
    byte (0c:42:a2:…)."""
    return f"0c:42:{0xA1 + (number >> 16):02x}:{number >> 8 & 0xFF:02x}:{number & 0xFF:02x}:{port:02x}"


# The MAC numbers of the management nodes (0x8000 + m) and the NVL72 trays (0xC000 + …) lie above the compute nodes'
# first 32,767; a fleet larger than that (the node-list bench's 100,000) numbers its next nodes past them.
RESERVED_MAC_NUMBERS = range(0x8000, 0x10000)


def _compute_mac(node_number: int, port: int) -> str:
    number = node_number if node_number < RESERVED_MAC_NUMBERS.start else node_number + len(RESERVED_MAC_NUMBERS)
    return _mac(number, port)


def _ip(second_octet: int, number: int) -> str:
    """10.<second octet>.x.y for the number; past 65,535 the next /16 is 64 further on (10.10 → 10.74), clear of
    the demo's other ranges (10.10 to 10.24)."""
    return f"10.{second_octet + 64 * (number >> 16)}.{number >> 8 & 0xFF}.{number & 0xFF}"


class _Loader:
    """Creates whatever rows of the shape are missing, in bulk, keyed by natural keys."""

    def __init__(self, shape: ClusterShape):
        self.shape = shape
        self.created: dict[str, int] = {}

    def ensure(self, model, rows: list[dict], key: tuple[str, ...]) -> None:
        existing = set(model.objects.values_list(*[_attname(model, field) for field in key]))
        missing = [model(**row) for row in rows if tuple(_key_value(row, field) for field in key) not in existing]
        model.objects.bulk_create(missing, batch_size=2000)
        self.created[model._meta.verbose_name_plural] = len(missing)

    def run(self) -> dict[str, int]:
        sync_gpu_skus(GpuSku)
        sku = GpuSku.objects.get(name="H200 SXM")
        site, _ = Site.objects.get_or_create(slug=self.shape.site_slug, defaults={"name": "Demo DC"})
        self._racks(site)
        # Rack-scale racks have power shelves, not PDUs, and no leaves of the H200 fabric.
        racks = {rack.name: rack for rack in site.racks.filter(nvlink_domain__isnull=True)}
        self._tags()
        self._nodes(racks, sku)
        nodes = {node.hostname: node for node in Node.objects.filter(hostname__in=self._all_hostnames())}
        self._gpus(nodes, sku)
        self._nics(nodes)
        self._switches(site, racks)
        self._pdus(racks)
        self._cables(nodes)
        self._firmware(nodes)
        self._storage(site, nodes)
        _RackScaleLoader(self, site).run()
        self._retire_uncabled_fabric(site)
        return self.created

    def _compute_numbers(self) -> range:
        return range(1, self.shape.compute_nodes + 1)

    def _all_hostnames(self) -> list[str]:
        names = [compute_hostname(n) for n in self._compute_numbers()]
        return names + [f"mgmt{n:02d}" for n in range(1, self.shape.management_nodes + 1)]

    def _rack_of(self, number: int) -> tuple[str, int | None]:
        """The node's rack and its lowest U; None (in the rack, not placed) where a shape of more nodes a rack than
        its height holds (bench/api_nodes.py's 100,000 nodes, 16 a rack) reaches past the top."""
        rack_index, slot = divmod(number - 1, self.shape.nodes_per_rack)
        u = 3 + slot * NODE_U_HEIGHT
        return f"r{rack_index + 1:02d}", u if u + NODE_U_HEIGHT - 1 <= COMPUTE_RACK_U else None

    def _racks(self, site: Site) -> None:
        rows = [
            {
                "site": site,
                "name": f"r{i:02d}",
                "row": "A",
                "position": i,
                "u_height": COMPUTE_RACK_U,
                "power_budget_kw": Decimal("100"),
            }
            for i in range(1, self.shape.racks + 1)
        ]
        rows.append(
            {
                "site": site,
                "name": "net01",
                "row": "B",
                "position": 1,
                "u_height": NETWORK_RACK_U,
                "power_budget_kw": Decimal("20"),
            }
        )
        self.ensure(Rack, rows, ("site", "name"))

    def _tags(self) -> None:
        rows = [
            {"name": "training", "slug": "training", "colour": "#1f77b4"},
            {"name": "inference", "slug": "inference", "colour": "#2ca02c"},
        ]
        self.ensure(Tag, rows, ("slug",))

    def _nodes(self, racks: dict, sku: GpuSku) -> None:
        rows = []
        last_rack_start = (self.shape.racks - 1) * self.shape.nodes_per_rack
        for n in self._compute_numbers():
            rack_name, u = self._rack_of(n)
            # The last rack has just been racked: the nodes operators will bring up with the deployment wizard.
            status = NodeStatus.RACKED if n > last_rack_start else NodeStatus.READY
            rows.append(
                {
                    "hostname": compute_hostname(n),
                    "role": NodeRole.COMPUTE,
                    "status": status,
                    "rack": racks[rack_name],
                    "u_position": u,
                    "u_height": NODE_U_HEIGHT,
                    "management_ip": _ip(10, n),
                    "bmc_address": _ip(20, n),
                    "gpu_sku": sku,
                    "expected_gpu_count": 8,
                    "cpu_model": "Intel(R) Xeon(R) Platinum 8480+",
                    "cpu_sockets": 2,
                    "cpu_cores": 112,
                    "memory_gib": 2048,
                    "numa_nodes": 2,
                    "transport": Transport.SIM,  # the demo runs on the simulator unless pointed at real nodes
                }
            )
        for m in range(1, self.shape.management_nodes + 1):
            rows.append(
                {
                    "hostname": f"mgmt{m:02d}",
                    "role": NodeRole.MANAGEMENT,
                    "status": NodeStatus.READY,
                    "rack": racks["net01"],
                    "u_position": 1 + (m - 1) * 2,
                    "u_height": 2,
                    "management_ip": _ip(11, m),
                    "bmc_address": _ip(21, m),
                    "cpu_model": "AMD EPYC 9354",
                    "cpu_sockets": 1,
                    "cpu_cores": 32,
                    "memory_gib": 512,
                    "numa_nodes": 1,
                    "transport": Transport.SIM,
                }
            )
        self.ensure(Node, rows, ("hostname",))
        training, inference = Tag.objects.get(slug="training"), Tag.objects.get(slug="inference")
        split = self.shape.compute_nodes * 3 // 4
        through = Node.tags.through
        existing = set(through.objects.values_list("node_id", "tag_id"))
        links = []
        for node in Node.objects.filter(role=NodeRole.COMPUTE, hostname__in=self._all_hostnames()).only(
            "id", "hostname"
        ):
            tag = training if int(node.hostname[3:]) <= split else inference
            if (node.id, tag.id) not in existing:
                links.append(through(node_id=node.id, tag_id=tag.id))
        through.objects.bulk_create(links, batch_size=2000)

    def _gpus(self, nodes: dict, sku: GpuSku) -> None:
        rows = []
        for n in self._compute_numbers():
            node = nodes[compute_hostname(n)]
            for i, bus in enumerate(GPU_BUS_IDS):
                rows.append(
                    {
                        "node": node,
                        "index": i,
                        "sku": sku,
                        "uuid": _gpu_uuid(node.hostname, i),
                        "serial": f"16549{n:04d}{i:03d}",
                        "pci_bus_id": f"00000000:{bus.upper()}:00.0",
                        "numa_node": i // 4,
                        "pcie_switch": f"PEX{i // 2}",
                        "presence": GpuPresence.PRESENT,
                        "health": GpuHealth.HEALTHY,
                    }
                )
        self.ensure(Gpu, rows, ("node", "index"))

    def _nics(self, nodes: dict) -> None:
        rows = []
        for n in self._compute_numbers():
            node = nodes[compute_hostname(n)]
            for k, bus in enumerate(NIC_BUS_IDS):
                rows.append(
                    _rdma_nic(
                        node,
                        k,
                        _compute_mac(n, k + 1),
                        numa_node=k // 4,
                        pci=f"0000:{bus}:00.0",
                        pcie_switch=f"PEX{k // 2}",
                    )
                )
            rows.append(_management_nic(node, _compute_mac(n, 0)))
        for m in range(1, self.shape.management_nodes + 1):
            node = nodes[f"mgmt{m:02d}"]
            number = 0x8000 + m
            for k, plane in enumerate([Plane.A, Plane.B]):
                rows.append(
                    {
                        "node": node,
                        "name": f"ens{k + 1}np0",
                        "mac": _mac(number, k + 1),
                        "purpose": NicPurpose.DATA,
                        "speed_gbps": 400,
                        "mtu": 9000,
                        "rdma_capable": True,
                        "transport": NicTransport.ROCE,
                        "plane": plane,
                        "pfc_priorities": [RDMA_PRIORITY],
                        "ecn_enabled": True,
                        "numa_node": 0,
                    }
                )
            rows.append(_management_nic(node, _mac(number, 0)))
        self.ensure(Nic, rows, ("node", "name"))
        self._nic_gpu_peers(nodes)

    def _nic_gpu_peers(self, nodes: dict) -> None:
        through = Nic.peer_gpus.through
        existing = set(through.objects.values_list("nic_id", "gpu_id"))
        compute_ids = [nodes[compute_hostname(n)].id for n in self._compute_numbers()]
        gpus_by_switch = {}
        for gpu in Gpu.objects.filter(node_id__in=compute_ids).only("id", "node_id", "pcie_switch"):
            gpus_by_switch.setdefault((gpu.node_id, gpu.pcie_switch), []).append(gpu.id)
        links = []
        nics = Nic.objects.filter(node_id__in=compute_ids, purpose=NicPurpose.DATA).only("id", "node_id", "pcie_switch")
        for nic in nics:
            for gpu_id in gpus_by_switch.get((nic.node_id, nic.pcie_switch), []):
                if (nic.id, gpu_id) not in existing:
                    links.append(through(nic_id=nic.id, gpu_id=gpu_id))
        through.objects.bulk_create(links, batch_size=5000)

    def _switches(self, site: Site, racks: dict) -> None:
        rows = []
        nodes_top = 2 + self.shape.nodes_per_rack * NODE_U_HEIGHT  # the compute nodes fill U3 up to here
        for r in range(1, self.shape.racks + 1):
            for number, plane in enumerate((Plane.A, Plane.B)):
                # The two leaves at the top of the front; where the nodes reach that high, not placed.
                leaf_u = COMPUTE_RACK_U - number
                rows.append(
                    _fabric_switch(
                        f"leaf-r{r:02d}-{plane.lower()}",
                        racks[f"r{r:02d}"],
                        plane,
                        SwitchTier.LEAF,
                        position=leaf_u if leaf_u > nodes_top else None,
                    )
                )
        for plane in (Plane.A, Plane.B):
            fabric = [
                (self.spine_name(plane, pod, s), SwitchTier.SPINE)
                for pod in range(1, self.shape.pods + 1)
                for s in range(1, self.shape.spines + 1)
            ]
            fabric += [(f"core-{plane.lower()}{c}", SwitchTier.CORE) for c in range(1, self.shape.cores + 1)]
            for s, (name, tier) in enumerate(fabric, start=1):
                position = None if self.shape.three_tier else self._spine_u(plane, s)
                rows.append(_fabric_switch(name, racks["net01"], plane, tier, position=position))
        for k in range(1, self._management_switches() + 1):
            rows.append(
                {
                    "name": management_switch_name(k),
                    "site": site,
                    "rack": racks["net01"],
                    # The first at the rear, behind the first spine (a half-depth switch); a large fleet's others
                    # not placed.
                    "position": NETWORK_RACK_U if k == 1 else None,
                    "face": RackFace.REAR,
                    "plane": Plane.MANAGEMENT,
                    "tier": SwitchTier.MANAGEMENT,
                    "model": "SN2201",
                    "port_count": self._management_ports(k),
                    "port_speed_gbps": 25,
                }
            )
        self.ensure(Switch, rows, ("name",))
        # A grown cluster needs more management ports than the switches first had.
        for k in range(1, self._management_switches() + 1):
            Switch.objects.filter(name=management_switch_name(k), port_count__lt=self._management_ports(k)).update(
                port_count=self._management_ports(k)
            )

    def spine_name(self, plane: str, pod: int, number: int) -> str:
        """spine-a1 in two tiers; spine-p01-a1 (pod 1's first spine of plane A) in three."""
        return (
            f"spine-p{pod:02d}-{plane.lower()}{number}" if self.shape.three_tier else f"spine-{plane.lower()}{number}"
        )

    def _spine_u(self, plane: str, number: int) -> int | None:
        """Spines fill net01's front from the top down, plane A's then plane B's, above the management nodes; a
        fabric grown past what fits leaves the rest unplaced. A spine's U depends only on its name and the shape's
        spine count, so growing the cluster keeps the U of spines that stay."""
        index = (0 if plane == Plane.A else self.shape.spines) + number - 1
        position = NETWORK_RACK_U - index
        return position if position > 2 * self.shape.management_nodes else None

    def _pdus(self, racks: dict) -> None:
        """Each rack has two vertical PDUs at the rear, feed A on the left and B on the right, each sized to carry
        the rack's whole budget alone (A/B redundancy)."""
        rows = [
            {
                "name": f"pdu-{rack.name}-{feed.lower()}",
                "rack": rack,
                "model": "0U 3-phase",
                "feed": feed,
                "max_power_w": int(rack.power_budget_kw * 1000),
                "outlet_count": 48,
                "face": RackFace.REAR,
                "side": side,
            }
            for rack in racks.values()
            for feed, side in ((PduFeed.A, RackSide.LEFT), (PduFeed.B, RackSide.RIGHT))
        ]
        self.ensure(Pdu, rows, ("name",))

    def management_port(self, number: int, *, management_node: bool = False) -> tuple[str, str]:
        """(switch, port) of the management NIC of compute node `number`, or of management node `number`: those on
        the first switch's last ports."""
        if management_node:
            return management_switch_name(1), f"swp{self._management_ports(1) - number + 1}"
        switch, port = divmod(number - 1, NODES_PER_MANAGEMENT_SWITCH)
        return management_switch_name(switch + 1), f"swp{port + 1}"

    def _management_switches(self) -> int:
        return max(1, math.ceil(self.shape.compute_nodes / NODES_PER_MANAGEMENT_SWITCH))

    def _management_ports(self, switch: int = 1) -> int:
        """The ports of the k-th management switch: its compute nodes', and on the first the management nodes' and
        spares."""
        nodes = min(NODES_PER_MANAGEMENT_SWITCH, self.shape.compute_nodes - (switch - 1) * NODES_PER_MANAGEMENT_SWITCH)
        return max(48, nodes + (self.shape.management_nodes + 13 if switch == 1 else 0))

    def _cables(self, nodes: dict) -> None:
        """Every port follows from the node's number or the rack's, so a grown cluster keeps the cables it had;
        where the new shape moves an end (more spines, a bigger management switch), the old cable is replaced."""
        switches = {switch.name: switch for switch in Switch.objects.select_related("site")}
        nics = {
            (nic.node_id, nic.name): nic
            for nic in Nic.objects.filter(node_id__in=[node.id for node in nodes.values()]).only(
                "id", "node_id", "name"
            )
        }

        def management_cable(node, number: int, *, management_node: bool = False) -> dict:
            switch, port = self.management_port(number, management_node=management_node)
            eno1 = nics[(node.id, "eno1")]
            return _cable(node, eno1, switches[switch], port, 25, CableMedium.CAT6, Plane.MANAGEMENT)

        planned = []
        for n in self._compute_numbers():
            node = nodes[compute_hostname(n)]
            rack, slot = self._rack_of(n)[0], (n - 1) % self.shape.nodes_per_rack
            for k in range(8):
                plane = Plane.A if k % 2 == 0 else Plane.B
                port = slot * RAIL_NICS_PER_PLANE + k // 2 + 1
                nic = nics[(node.id, f"ens{k + 1}np0")]
                leaf = switches[f"leaf-{rack}-{plane.lower()}"]
                planned.append(_cable(node, nic, leaf, f"swp{port}", 400, CableMedium.AOC, plane))
            planned.append(management_cable(node, n))
        planned += self._uplinks(switches)
        for m in range(1, self.shape.management_nodes + 1):
            node = nodes[f"mgmt{m:02d}"]
            for k, plane in enumerate([Plane.A, Plane.B]):
                spine = switches[f"core-{plane.lower()}1" if self.shape.three_tier else f"spine-{plane.lower()}1"]
                port = f"swp{SWITCH_PORTS - m + 1}"
                planned.append(
                    _cable(node, nics[(node.id, f"ens{k + 1}np0")], spine, port, 400, CableMedium.FIBER, plane)
                )
            planned.append(management_cable(node, m, management_node=True))
        self.created["cables replaced"] = _replace_moved_cables(planned)
        self.ensure(Cable, planned, ("b_switch", "b_port"))

    def _retire_uncabled_fabric(self, site: Site) -> None:
        """A cluster grown from two tiers into three keeps no spine of the old names: once the new shape's cables
        (the NVL72 racks' too) have replaced theirs, remove the spines and cores of this site that no cable holds."""
        fabric = Switch.objects.filter(site=site, tier__in=(SwitchTier.SPINE, SwitchTier.CORE))
        held = set(Cable.objects.filter(a_switch__in=fabric).values_list("a_switch_id", flat=True))
        held |= set(Cable.objects.filter(b_switch__in=fabric).values_list("b_switch_id", flat=True))
        retired = fabric.exclude(pk__in=held)
        self.created["spines retired"] = retired.count()
        retired.delete()

    def _uplinks(self, switches: dict) -> list[dict]:
        rows = []
        spines = self.shape.spines
        ports_per_spine = -(-self.shape.leaf_downlinks // spines)
        for plane in (Plane.A, Plane.B):
            for r in range(1, self.shape.racks + 1):
                leaf = f"leaf-r{r:02d}-{plane.lower()}"
                pod, index = divmod(r - 1, self.shape.racks_per_pod)
                # Non-blocking: as many 400G uplinks as the rack can take downlinks, spread evenly over the spines.
                for u in range(self.shape.leaf_downlinks):
                    spine = self.spine_name(plane, pod + 1, u % spines + 1)
                    rows.append(
                        _switch_link(
                            switches[leaf],
                            f"swp{self.shape.leaf_downlinks + u + 1}",
                            switches[spine],
                            f"swp{index * ports_per_spine + u // spines + 1}",
                            plane,
                            f"{leaf}/{spine}/{u + 1}",
                        )
                    )
            rows += self._core_uplinks(switches, plane, downlinks=self.shape.racks_per_pod * ports_per_spine)
        return rows

    def _core_uplinks(self, switches: dict, plane: str, *, downlinks: int) -> list[dict]:
        rows = []
        for pod in range(1, self.shape.pods + 1):
            rows += self.pod_core_uplinks(
                switches, plane, pod, uplinks=self.shape.spine_uplinks, first_port=downlinks + 1
            )
        return rows

    def pod_core_uplinks(self, switches: dict, plane: str, pod: int, *, uplinks: int, first_port: int) -> list[dict]:
        """Each of the pod's spines j sends its uplink u (column j·U + u) to the core that holds that column, on the
        port kept for that pod there: every core joins every H200 pod with the same number of links (non-blocking).
        The NVL72 racks' pod uses the first `uplinks` of each spine's columns."""
        rows = []
        shape = self.shape
        for j in range(shape.spines):
            spine = self.spine_name(plane, pod, j + 1)
            for u in range(uplinks):
                core_index, slot = divmod(j * shape.spine_uplinks + u, shape.columns_per_core)
                core = f"core-{plane.lower()}{core_index + 1}"
                rows.append(
                    _switch_link(
                        switches[spine],
                        f"swp{first_port + u}",
                        switches[core],
                        f"swp{slot * shape.fabric_pods + pod}",
                        plane,
                        f"{spine}/{core}/{u + 1}",
                    )
                )
        return rows

    def _firmware(self, nodes: dict) -> None:
        rows = []
        for hostname, node in nodes.items():
            bios = BIOS_BEHIND if hostname == compute_hostname(DRIFTED_NODE) else BIOS_BASELINE
            rows.append({"node": node, "component": FirmwareComponent.BIOS, "target": "", "version": bios})
            rows.append({"node": node, "component": FirmwareComponent.BMC, "target": "", "version": BMC_VERSION})
            if node.role != NodeRole.COMPUTE:
                continue
            for i in range(8):
                rows.append(
                    {
                        "node": node,
                        "component": FirmwareComponent.GPU_VBIOS,
                        "target": f"GPU{i}",
                        "version": VBIOS_VERSION,
                    }
                )
                rows.append(
                    {
                        "node": node,
                        "component": FirmwareComponent.NIC_FIRMWARE,
                        "target": f"ens{i + 1}np0",
                        "version": NIC_FIRMWARE,
                    }
                )
        self.ensure(Firmware, rows, ("node", "component", "target"))

    def _storage(self, site: Site, nodes: dict) -> None:
        tiers = [
            ("Hot NVMe RAID", StorageTierKind.HOT, "NVMe RAID0 (local)", "24", "20", "2"),
            ("Warm SAS SSD", StorageTierKind.WARM, "SAS SSD (parallel file system)", "8", "5", "10"),
            ("Cold object store", StorageTierKind.COLD, "S3-compatible object store", "4", "1", "200"),
        ]
        rows = [
            {
                "site": site,
                "name": name,
                "kind": kind,
                "medium": medium,
                "bandwidth_gb_per_s": Decimal(bandwidth),
                "required_bandwidth_gb_per_s": Decimal(required),
                "capacity_tb": Decimal(capacity),
            }
            for name, kind, medium, bandwidth, required, capacity in tiers
        ]
        self.ensure(StorageTier, rows, ("site", "name"))
        by_kind = {tier.kind: tier for tier in site.storage_tiers.all()}
        mounts = [
            ("/scratch", StorageTierKind.HOT, 2000),
            ("/shared", StorageTierKind.WARM, 10000),
            ("/checkpoints", StorageTierKind.COLD, 200000),
        ]
        rows = [
            {"node": nodes[compute_hostname(n)], "tier": by_kind[kind], "mount_point": path, "capacity_gb": size}
            for n in self._compute_numbers()
            for path, kind, size in mounts
        ]
        self.ensure(Volume, rows, ("node", "mount_point"))


NVL72 = RACK_SYSTEMS["GB200 NVL72"]
TRAY_NICS_PER_PLANE = 2  # each tray's four ConnectX-7, alternating planes A and B
NVL_RACK_U = 48
NVL_RACK_KW = Decimal("132")  # NVIDIA's GB200 NVL72 draws about 120-132 kW
# A GB200 compute tray puts each Blackwell GPU in its own PCI domain, behind its Grace over NVLink-C2C: GPUs 0-1 on
# the first Grace (NUMA node 0, cores 0-71), GPUs 2-3 on the second (NUMA node 1, cores 72-143).
TRAY_GPU_BUS_IDS = ["00000008:01:00.0", "00000009:01:00.0", "00000018:01:00.0", "00000019:01:00.0"]
# Four ConnectX-7 400G NICs (one beside each GPU, the east-west fabric) and two BlueField-3 DPUs (north-south:
# storage and the front end), as in NVIDIA's reference compute tray.
TRAY_CX7_PCI = ["0000:03:00.0", "0002:03:00.0", "0010:03:00.0", "0012:03:00.0"]
TRAY_BF3_PCI = ["0006:01:00.0", "0016:01:00.0"]
TRAY_BIOS, TRAY_BMC, TRAY_VBIOS, TRAY_NIC_FIRMWARE = "1.3.0", "25.04.7", "97.00.82.00.5A", "28.43.1014"
# The default partition's id, which nvidia-smi -q prints as the GPUs' CliqueId (NVIDIA's Kubernetes DRA driver
# labels GB200 nodes <ClusterUUID>.32766): recalled from its documentation, not from a capture.
DEFAULT_PARTITION_ID = 32766
# Bottom up: four power shelves, compute trays 1-10, the nine switch trays, compute trays 11-18, four power shelves.
TRAY_BASE_U, SWITCH_BASE_U = 5, 15


def rack_scale_name(number: int) -> str:
    return f"nvl{number:02d}"


def tray_hostname(rack: int, slot: int) -> str:
    return f"{rack_scale_name(rack)}-t{slot:02d}"


class _RackScaleLoader:
    """Builds each rack-scale rack of the shape as a whole GB200 NVL72: its NVLink domain, 18 compute trays (nodes
    with 4 GB200 GPUs and 2 Grace CPUs), 9 switch trays, 8 power shelves, a coolant loop with a leak sensor in every
    tray, one IMEX domain with all trays and the default NVLink partition, and the trays' ConnectX-7 cabled into the
    H200 racks' fabric (_fabric)."""

    def __init__(self, loader: _Loader, site: Site):
        self.loader, self.site = loader, site
        self.count = loader.shape.rack_scale_racks

    def ensure(self, model, rows: list[dict], key: tuple[str, ...]) -> None:
        before = self.loader.created.get(model._meta.verbose_name_plural, 0)
        self.loader.ensure(model, rows, key)
        self.loader.created[model._meta.verbose_name_plural] += before

    def run(self) -> None:
        if not self.count:
            return
        sku = GpuSku.objects.get(name=NVL72.gpu_sku)
        self._racks()
        racks = {rack.name: rack for rack in self.site.racks.filter(name__in=self._rack_names())}
        self._domains(racks)
        domains = {domain.rack.name: domain for domain in NvlinkDomain.objects.filter(rack__in=racks.values())}
        self._trays(racks, domains, sku)
        trays = {node.hostname: node for node in Node.objects.filter(hostname__in=self._hostnames())}
        self._gpus(trays, sku)
        self._nics(trays)
        self._fabric(racks, trays)
        self._switch_trays(domains)
        self._power_shelves(racks)
        self._cooling(racks, trays)
        self._imex_and_partitions(domains, trays)
        self._firmware(trays)
        self._storage(trays)

    def _numbers(self) -> range:
        return range(1, self.count + 1)

    def _rack_names(self) -> list[str]:
        return [rack_scale_name(r) for r in self._numbers()]

    def _slots(self) -> range:
        return range(1, NVL72.compute_trays + 1)

    def _hostnames(self) -> list[str]:
        return [tray_hostname(r, slot) for r in self._numbers() for slot in self._slots()]

    def _tray_number(self, rack: int, slot: int) -> int:
        """A number for the tray's addresses, apart from the H200 nodes' (MAC 0c:42:a1:c0:…, IP 10.12.…)."""
        return 0xC000 + (rack - 1) * NVL72.compute_trays + slot

    def _racks(self) -> None:
        rows = [
            {
                "site": self.site,
                "name": rack_scale_name(r),
                "row": "C",
                "position": r,
                "u_height": NVL_RACK_U,
                "power_budget_kw": NVL_RACK_KW,
            }
            for r in self._numbers()
        ]
        self.ensure(Rack, rows, ("site", "name"))

    def _domains(self, racks: dict) -> None:
        rows = [
            {
                "name": name,
                "rack": racks[name],
                "system": NVL72.name,
                "cluster_uuid": uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.nvlink.rackpilot.demo"),
            }
            for name in self._rack_names()
        ]
        self.ensure(NvlinkDomain, rows, ("name",))

    def _tray_u(self, slot: int) -> int:
        return TRAY_BASE_U + slot - 1 if slot <= 10 else SWITCH_BASE_U + NVL72.switch_trays + slot - 11

    def _trays(self, racks: dict, domains: dict, sku: GpuSku) -> None:
        rows = []
        for r in self._numbers():
            name = rack_scale_name(r)
            for slot in self._slots():
                number = self._tray_number(r, slot) - 0xC000
                rows.append(
                    {
                        "hostname": tray_hostname(r, slot),
                        "role": NodeRole.COMPUTE,
                        "status": NodeStatus.READY,
                        "rack": racks[name],
                        "u_position": self._tray_u(slot),
                        "u_height": NVL72.tray_u,
                        "management_ip": _ip(12, number),
                        "bmc_address": _ip(22, number),
                        "gpu_sku": sku,
                        "expected_gpu_count": NVL72.gpus_per_tray,
                        "cpu_model": "NVIDIA Grace",
                        "cpu_sockets": NVL72.cpus_per_tray,
                        "cpu_cores": 72 * NVL72.cpus_per_tray,
                        "memory_gib": 894,  # 2 x 480 GB of LPDDR5X
                        "numa_nodes": NVL72.cpus_per_tray,
                        "nvlink_domain": domains[name],
                        "tray_slot": slot,
                        "transport": Transport.SIM,
                    }
                )
        self.ensure(Node, rows, ("hostname",))
        training = Tag.objects.get(slug="training")
        through = Node.tags.through
        existing = set(through.objects.filter(tag=training).values_list("node_id", flat=True))
        ids = Node.objects.filter(hostname__in=self._hostnames()).values_list("id", flat=True)
        through.objects.bulk_create([through(node_id=pk, tag_id=training.id) for pk in ids if pk not in existing])

    def _gpus(self, trays: dict, sku: GpuSku) -> None:
        rows = []
        for r in self._numbers():
            for slot in self._slots():
                node = trays[tray_hostname(r, slot)]
                number = self._tray_number(r, slot) - 0xC000
                for i, bus in enumerate(TRAY_GPU_BUS_IDS):
                    rows.append(
                        {
                            "node": node,
                            "index": i,
                            "sku": sku,
                            "uuid": _gpu_uuid(node.hostname, i),
                            "serial": f"17924{number:04d}{i:03d}",
                            "pci_bus_id": bus,
                            "numa_node": i // 2,
                            "pcie_switch": "",
                            "presence": GpuPresence.PRESENT,
                            "health": GpuHealth.HEALTHY,
                        }
                    )
        self.ensure(Gpu, rows, ("node", "index"))

    def _nics(self, trays: dict) -> None:
        rows = []
        for r in self._numbers():
            for slot in self._slots():
                node = trays[tray_hostname(r, slot)]
                number = self._tray_number(r, slot)
                for k, pci in enumerate(TRAY_CX7_PCI):
                    rows.append(_rdma_nic(node, k, _mac(number, k + 1), numa_node=k // 2, pci=pci))
                for k, pci in enumerate(TRAY_BF3_PCI):
                    rows.append(
                        {
                            "node": node,
                            "name": f"ens{k + 5}f0np0",
                            "mac": _mac(number, k + 5),
                            "purpose": NicPurpose.STORAGE,
                            "speed_gbps": 400,
                            "mtu": 9000,
                            "rdma_capable": True,
                            "transport": NicTransport.ETHERNET,
                            "numa_node": k,
                            "pci_address": pci,
                        }
                    )
                rows.append(_management_nic(node, _mac(number, 0)))
        self.ensure(Nic, rows, ("node", "name"))
        # Each ConnectX-7 serves the GPU beside it.
        through = Nic.peer_gpus.through
        existing = set(through.objects.values_list("nic_id", "gpu_id"))
        gpus = {(gpu.node_id, gpu.index): gpu.id for gpu in Gpu.objects.filter(node__in=trays.values())}
        links = []
        data = Nic.objects.filter(node__in=trays.values(), purpose=NicPurpose.DATA).only("id", "node_id", "name")
        for nic in data:
            gpu_id = gpus.get((nic.node_id, int(nic.name[3]) - 1))
            if gpu_id and (nic.id, gpu_id) not in existing:
                links.append(through(nic_id=nic.id, gpu_id=gpu_id))
        through.objects.bulk_create(links)

    def _fabric(self, racks: dict, trays: dict) -> None:
        """Each NVL72 rack has a leaf per plane of its own (two of each tray's ConnectX-7 on each, as the H200 racks'
        NICs are), non-blocking up to the plane's spines: in two tiers on the ports after the H200 racks' leaves, in
        three on the spines of a pod of the NVL72 racks' own, whose uplinks join the cores as the H200 pods' do."""
        shape = self.loader.shape
        site = self.site
        pod = shape.pods + 1  # three tiers only
        fabric = []
        leaves: dict[str, int] = {}  # name -> U: at the top of the front, above the upper power shelves
        for r in self._numbers():
            for number, plane in enumerate((Plane.A, Plane.B)):
                name = f"leaf-{rack_scale_name(r)}-{plane.lower()}"
                leaves[name] = NVL_RACK_U - number
                fabric.append(
                    _fabric_switch(name, racks[rack_scale_name(r)], plane, SwitchTier.LEAF, position=leaves[name])
                )
        if shape.three_tier:
            network_rack = site.racks.get(name="net01")
            for plane in (Plane.A, Plane.B):
                for j in range(1, shape.spines + 1):
                    name = self.loader.spine_name(plane, pod, j)
                    fabric.append(_fabric_switch(name, network_rack, plane, SwitchTier.SPINE))
        self.ensure(Switch, fabric, ("name",))
        for name, u in leaves.items():  # a demo loaded before they had a place gets it
            Switch.objects.filter(name=name, position__isnull=True).update(position=u)
        switches = {switch.name: switch for switch in Switch.objects.filter(site=site)}
        nics = {
            (nic.node_id, nic.name): nic
            for nic in Nic.objects.filter(node__in=trays.values(), purpose=NicPurpose.DATA).only(
                "id", "node_id", "name"
            )
        }
        downlinks = NVL72.compute_trays * TRAY_NICS_PER_PLANE
        spines = shape.spines
        per_spine = -(-downlinks // spines)
        # In two tiers the H200 racks' leaves take the spines' first ports.
        first = 0 if shape.three_tier else shape.racks * -(-shape.leaf_downlinks // spines)
        planned = []
        for r in self._numbers():
            for slot in self._slots():
                node = trays[tray_hostname(r, slot)]
                for k in range(len(TRAY_CX7_PCI)):
                    plane = Plane.A if k % 2 == 0 else Plane.B
                    leaf = switches[f"leaf-{rack_scale_name(r)}-{plane.lower()}"]
                    port = f"swp{(slot - 1) * TRAY_NICS_PER_PLANE + k // 2 + 1}"
                    planned.append(
                        _cable(node, nics[(node.id, f"ens{k + 1}np0")], leaf, port, 400, CableMedium.AOC, plane)
                    )
            for plane in (Plane.A, Plane.B):
                leaf = f"leaf-{rack_scale_name(r)}-{plane.lower()}"
                for u in range(downlinks):
                    spine = self.loader.spine_name(plane, pod, u % spines + 1)
                    planned.append(
                        _switch_link(
                            switches[leaf],
                            f"swp{downlinks + u + 1}",
                            switches[spine],
                            f"swp{first + (r - 1) * per_spine + u // spines + 1}",
                            plane,
                            f"{leaf}/{spine}/{u + 1}",
                        )
                    )
        if shape.three_tier:  # as much up from each of the pod's spines as its racks' ports down
            for plane in (Plane.A, Plane.B):
                planned += self.loader.pod_core_uplinks(
                    switches, plane, pod, uplinks=self.count * per_spine, first_port=SWITCH_PORTS // 2 + 1
                )
        # Grown H200 racks take more of each spine's first ports, and more spines spread every uplink: the NVL72
        # leaves' uplinks move up, as the H200 fabric's do (_Loader._cables).
        self.loader.created["cables replaced"] += _replace_moved_cables(planned)
        self.ensure(Cable, planned, ("b_switch", "b_port"))

    def _switch_trays(self, domains: dict) -> None:
        rows = [
            {
                "name": f"{name}-sw{slot}",
                "domain": domains[name],
                "slot": slot,
                "position": SWITCH_BASE_U + slot - 1,
                "serial": f"1333{r:03d}{slot:02d}",
                "bmc_address": _ip(24, (r - 1) * NVL72.switch_trays + slot),
            }
            for r, name in zip(self._numbers(), self._rack_names(), strict=True)
            for slot in range(1, NVL72.switch_trays + 1)
        ]
        self.ensure(NvlinkSwitchTray, rows, ("name",))
        # A demo loaded before its switch trays had BMC addresses gets them when loaded again.
        addresses = {row["name"]: row["bmc_address"] for row in rows}
        unset = list(NvlinkSwitchTray.objects.filter(name__in=addresses, bmc_address=""))
        for tray in unset:
            tray.bmc_address = addresses[tray.name]
        NvlinkSwitchTray.objects.bulk_update(unset, ["bmc_address"], batch_size=2000)

    def _power_shelves(self, racks: dict) -> None:
        half = NVL72.power_shelves // 2
        top = SWITCH_BASE_U + NVL72.switch_trays + NVL72.compute_trays - 10
        rows = [
            {
                "name": f"{name}-ps{n}",
                "rack": racks[name],
                "position": n if n <= half else top + n - half - 1,
                "psu_count": 6,
                "capacity_w": 33000,  # six 5.5 kW rectifiers
                "bmc_address": _ip(23, (r - 1) * NVL72.power_shelves + n),
            }
            for r, name in zip(self._numbers(), self._rack_names(), strict=True)
            for n in range(1, NVL72.power_shelves + 1)
        ]
        self.ensure(PowerShelf, rows, ("name",))

    def _cooling(self, racks: dict, trays: dict) -> None:
        rows = [
            {
                "name": f"{name}-loop",
                "rack": racks[name],
                "kind": CoolantLoopKind.IN_ROW_CDU,
                "design_flow_lpm": Decimal("80"),
                "max_supply_c": Decimal("40"),
                "max_return_c": Decimal("55"),
                "max_pressure_kpa": 350,
            }
            for name in self._rack_names()
        ]
        self.ensure(CoolantLoop, rows, ("name",))
        loops = {loop.rack_id: loop for loop in CoolantLoop.objects.filter(rack__in=racks.values())}
        sensors = [
            {"name": f"{node.hostname}-leak", "loop": loops[node.rack_id], "node": node} for node in trays.values()
        ]
        for switch_tray in NvlinkSwitchTray.objects.filter(domain__rack__in=racks.values()).select_related("domain"):
            loop = loops[switch_tray.domain.rack_id]
            sensors.append({"name": f"{switch_tray.name}-leak", "loop": loop, "switch_tray": switch_tray})
        self.ensure(LeakSensor, sensors, ("name",))

    def _imex_and_partitions(self, domains: dict, trays: dict) -> None:
        """One IMEX domain with every tray, and the default partition (all 72 GPUs), as a GB200 NVL72 ships."""
        self.ensure(ImexDomain, [{"name": f"{d.name}-imex", "domain": d} for d in domains.values()], ("name",))
        self.ensure(
            NvlinkPartition,
            [
                {"name": f"{d.name}-default", "domain": d, "partition_id": DEFAULT_PARTITION_ID}
                for d in domains.values()
            ],
            ("name",),
        )
        for model, suffix in ((ImexDomain, "imex"), (NvlinkPartition, "default")):
            for group in model.objects.filter(domain__in=domains.values()).filter(name__endswith=f"-{suffix}"):
                members = [node for node in trays.values() if node.nvlink_domain_id == group.domain_id]
                group.nodes.add(*members)  # adds only the missing links

    def _firmware(self, trays: dict) -> None:
        rows = []
        for node in trays.values():
            rows.append({"node": node, "component": FirmwareComponent.BIOS, "target": "", "version": TRAY_BIOS})
            rows.append({"node": node, "component": FirmwareComponent.BMC, "target": "", "version": TRAY_BMC})
            for i in range(NVL72.gpus_per_tray):
                rows.append(
                    {"node": node, "component": FirmwareComponent.GPU_VBIOS, "target": f"GPU{i}", "version": TRAY_VBIOS}
                )
                rows.append(
                    {
                        "node": node,
                        "component": FirmwareComponent.NIC_FIRMWARE,
                        "target": f"ens{i + 1}np0",
                        "version": TRAY_NIC_FIRMWARE,
                    }
                )
        self.ensure(Firmware, rows, ("node", "component", "target"))

    def _storage(self, trays: dict) -> None:
        by_kind = {tier.kind: tier for tier in self.site.storage_tiers.all()}
        mounts = [("/scratch", StorageTierKind.HOT, 2000), ("/shared", StorageTierKind.WARM, 10000)]
        mounts.append(("/checkpoints", StorageTierKind.COLD, 200000))
        rows = [
            {"node": node, "tier": by_kind[kind], "mount_point": path, "capacity_gb": size}
            for node in trays.values()
            for path, kind, size in mounts
        ]
        self.ensure(Volume, rows, ("node", "mount_point"))


def _fabric_switch(name: str, rack: Rack, plane: str, tier: str, *, position: int | None = None) -> dict:
    """A Spectrum-4 of the data fabric (128 × 400G) at the front of its rack (`position` None: in it, not placed)."""
    return {
        "name": name,
        "site": rack.site,
        "rack": rack,
        "position": position,
        "face": RackFace.FRONT,
        "plane": plane,
        "tier": tier,
        "model": "Spectrum-4 SN5600",
        "port_count": SWITCH_PORTS,
        "port_speed_gbps": 400,
    }


def _management_nic(node: Node, mac: str) -> dict:
    return {
        "node": node,
        "name": "eno1",
        "mac": mac,
        "purpose": NicPurpose.MANAGEMENT,
        "speed_gbps": 25,
        "mtu": 1500,
        "transport": NicTransport.ETHERNET,
        "plane": Plane.MANAGEMENT,
        "numa_node": 0,
    }


def _rdma_nic(node: Node, k: int, mac: str, *, numa_node: int, pci: str, pcie_switch: str = "") -> dict:
    """Data NIC k of a node: 400G RoCE, planes A and B alternating, PFC on the RDMA priority."""
    return {
        "node": node,
        "name": f"ens{k + 1}np0",
        "mac": mac,
        "purpose": NicPurpose.DATA,
        "speed_gbps": 400,
        "mtu": 9000,
        "rdma_capable": True,
        "transport": NicTransport.ROCE,
        "plane": Plane.A if k % 2 == 0 else Plane.B,
        "pfc_priorities": [RDMA_PRIORITY],
        "ecn_enabled": True,
        "numa_node": numa_node,
        "pci_address": pci,
        "pcie_switch": pcie_switch,
    }


def _switch_link(a_switch: Switch, a_port: str, b_switch: Switch, b_port: str, plane: str, label: str) -> dict:
    """A 400G fibre between two switches' ports (a leaf's uplink, a spine's to the core)."""
    return {
        "a_switch": a_switch,
        "a_port": a_port,
        "b_switch": b_switch,
        "b_port": b_port,
        "speed_gbps": 400,
        "medium": CableMedium.FIBER,
        "plane": plane,
        "label": label,
    }


def _cable(node: Node, nic: Nic, switch: Switch, port: str, speed: int, medium: str, plane: str) -> dict:
    return {
        "a_nic": nic,
        "b_switch": switch,
        "b_port": port,
        "speed_gbps": speed,
        "medium": medium,
        "plane": plane,
        "label": f"{node.hostname}:{nic.name}",
    }


def _replace_moved_cables(planned: list[dict]) -> int:
    """Delete the cables that hold a planned end but not the planned other end; returns how many."""

    def a_end(row) -> tuple:
        return (
            ("nic", _key_value(row, "a_nic"))
            if row.get("a_nic")
            else ("port", _key_value(row, "a_switch"), row["a_port"])
        )

    plan = {a_end(row): (_key_value(row, "b_switch"), row["b_port"]) for row in planned}
    b_ends = {b_end: a for a, b_end in plan.items()}
    nic_ids = [key[1] for key in plan if key[0] == "nic"]
    switch_ids = {key[1] for key in plan if key[0] == "port"} | {b_switch for b_switch, _ in b_ends}
    moved = []
    for cable in Cable.objects.filter(
        Q(a_nic_id__in=nic_ids) | Q(a_switch_id__in=switch_ids) | Q(b_switch_id__in=switch_ids)
    ):
        end = ("nic", cable.a_nic_id) if cable.a_nic_id else ("port", cable.a_switch_id, cable.a_port)
        b_end = (cable.b_switch_id, cable.b_port)
        if (end in plan and plan[end] != b_end) or (b_end in b_ends and b_ends[b_end] != end):
            moved.append(cable.pk)
    Cable.objects.filter(pk__in=moved).delete()
    return len(moved)


def _attname(model, field_name: str) -> str:
    return model._meta.get_field(field_name).attname


def _key_value(row: dict, field_name: str):
    value = row.get(field_name, "")
    return value.pk if hasattr(value, "pk") else value


@transaction.atomic
def load_cluster(shape: ClusterShape = DEMO) -> dict[str, int]:
    """Build (or complete) a cluster of the given shape; returns how many rows of each kind were created."""
    return _Loader(shape).run()
