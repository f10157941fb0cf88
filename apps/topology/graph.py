"""The cluster as a graph, built from the inventory in a fixed number of queries.

Vertices are nodes (servers) and switches, keyed ``node:<hostname>`` and ``switch:<name>`` so a host and a switch may
share a name. Cables are aggregated per pair of vertices into one edge carrying the summed capacity and the list of
cables (ports, speeds, link state) behind it. Per-NIC and per-GPU detail stays beside the graph for the rules that
need it (plane reachability, MTU, GPU-NIC affinity).

Capacity of a cable is the slowest of the cable, the rate a sweep last measured on it and the NICs at its ends.
``capacity_gbps`` of an edge counts only cables that are up (no NIC end reported link down); ``installed_gbps``
counts every cable.

The graph is built when the topology is evaluated (apps.topology.services.record_topology, when the inventory
changes); pages read the recorded evaluation, not the graph.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import networkx as nx
from django.db.models import Count, Max

from apps.inventory.choices import NODE_STATUS_IN_SERVICE, NicPurpose, NodeRole, Plane, StorageTierKind, SwitchTier
from apps.inventory.models import Cable, Gpu, Nic, Node, Rack, Site, StorageTier, Switch
from apps.topology.nvlink import DomainInfo, build_domains

DATA_PLANES = (Plane.A.value, Plane.B.value)
NODE_PREFIX = "node:"
SWITCH_PREFIX = "switch:"


def node_key(hostname: str) -> str:
    return NODE_PREFIX + hostname


def switch_key(name: str) -> str:
    return SWITCH_PREFIX + name


def key_name(key: str) -> str:
    """The hostname or switch name of a vertex key."""
    return key.split(":", 1)[1]


@dataclass(frozen=True)
class NodeInfo:
    hostname: str
    role: str
    status: str
    rack: str
    in_service: bool
    gpu_count: int = 0

    @property
    def key(self) -> str:
        return node_key(self.hostname)


@dataclass(frozen=True)
class SwitchInfo:
    name: str
    plane: str
    tier: str
    rack: str
    port_speed_gbps: int

    @property
    def key(self) -> str:
        return switch_key(self.name)


@dataclass(frozen=True)
class CableInfo:
    """One cable behind an edge, as shown in hover labels and the API."""

    cable_id: str
    a: str  # "gpu001:ens1np0" or "leaf-r01-a:swp1"
    b: str
    speed_gbps: int
    up: bool
    plane: str
    medium: str


@dataclass
class NicInfo:
    """A NIC of a node and where its cable lands (if it has one)."""

    hostname: str
    name: str
    purpose: str
    speed_gbps: int
    mtu: int
    plane: str
    numa_node: int | None
    pcie_switch: str
    link_up: bool
    switch: str | None = None  # switch name at the far end of the cable
    switch_port: str = ""
    switch_plane: str = ""
    cable_speed_gbps: int = 0
    peer_gpu_indexes: set[int] = field(default_factory=set)

    @property
    def label(self) -> str:
        return f"{self.hostname}:{self.name}"

    @property
    def is_data(self) -> bool:
        return self.purpose == NicPurpose.DATA

    @property
    def cabled_plane(self) -> str:
        """The plane the NIC is cabled into: the switch's plane, else the NIC's own label."""
        return self.switch_plane or self.plane


@dataclass(frozen=True)
class GpuInfo:
    hostname: str
    index: int
    numa_node: int | None
    pcie_switch: str

    @property
    def label(self) -> str:
        return f"{self.hostname} GPU{self.index}"


@dataclass(frozen=True)
class StorageTierInfo:
    name: str
    kind: str
    site: str
    bandwidth_gb_per_s: float  # GB/s, as the inventory stores it
    required_bandwidth_gb_per_s: float


@dataclass
class ClusterGraph:
    """The graph plus the per-element detail the rules read.

    ``nodes`` is what each node is (role, status, rack); the rest is the fabric."""

    graph: nx.Graph
    nodes: dict[str, NodeInfo]
    switches: dict[str, SwitchInfo]
    nics: dict[str, list[NicInfo]]
    gpus: dict[str, list[GpuInfo]]
    storage_tiers: list[StorageTierInfo]
    cable_count: int = 0
    nvlink_domains: list[DomainInfo] = field(default_factory=list)  # rack-scale systems' NVLink domains

    def compute_nodes(self, *, in_service_only: bool = True) -> list[NodeInfo]:
        return [
            node
            for node in self.nodes.values()
            if node.role == NodeRole.COMPUTE and (node.in_service or not in_service_only)
        ]

    def data_planes(self) -> list[str]:
        """The data planes present in the fabric (A, B), in order."""
        present = {switch.plane for switch in self.switches.values()}
        return [plane for plane in DATA_PLANES if plane in present]

    def edges(self):
        """(u, v, attributes) for every aggregated link."""
        return self.graph.edges(data=True)


def _rack_name(value: str | None) -> str:
    return value or ""


@dataclass(frozen=True)
class Fabric:
    """What the fabric tables say (switches, NICs, GPUs and their peers, cables, storage tiers), for one list of
    nodes."""

    graph: nx.Graph  # vertices and cables only: what a node is (role, status, rack) lives in ClusterGraph.nodes
    switches: dict[str, SwitchInfo]
    nics: dict[str, list[NicInfo]]
    gpus: dict[str, list[GpuInfo]]
    storage_tiers: list[StorageTierInfo]
    cable_count: int


FABRIC_TABLES = (Switch, Nic, Cable, Gpu, StorageTier, Rack, Site)  # Rack, Site: switches' racks, tiers' sites


def build_cluster_graph() -> ClusterGraph:
    """The inventory as a graph, in eight queries whatever the cluster's size (a few more where it has NVLink
    domains)."""
    rows = list(Node.objects.values_list("id", "hostname", "role", "status", "rack__name"))
    fabric = _build_fabric({node_id: hostname for node_id, hostname, *_ in rows})
    nodes = [
        NodeInfo(
            hostname=hostname,
            role=role,
            status=status,
            rack=_rack_name(rack),
            in_service=status in NODE_STATUS_IN_SERVICE,
            gpu_count=len(fabric.gpus.get(hostname, ())),
        )
        for _, hostname, role, status, rack in rows
    ]
    return ClusterGraph(
        graph=fabric.graph,
        nodes={node.hostname: node for node in sorted(nodes, key=lambda node: node.hostname)},
        switches=fabric.switches,
        nics=fabric.nics,
        gpus=fabric.gpus,
        storage_tiers=fabric.storage_tiers,
        cable_count=fabric.cable_count,
        nvlink_domains=build_domains({host: [gpu.index for gpu in gpus] for host, gpus in fabric.gpus.items()}),
    )


def fabric_figures() -> list[tuple]:
    """table_figures of each fabric table, and the NIC-GPU peers' count and highest key (they have no `updated`: their
    rows only come and go)."""
    peers = Nic.peer_gpus.through.objects.aggregate(count=Count("pk"), last=Max("pk"))
    return [*(table_figures(model) for model in FABRIC_TABLES), ("peers", peers["count"], peers["last"])]


def table_figures(model) -> tuple:
    """The table's row count, highest key and latest `updated`, in one query: changes whenever a row is created,
    deleted or saved (not by a bulk .update(), which leaves `updated` alone)."""
    row = model.objects.aggregate(count=Count("pk"), last=Max("pk"), updated=Max("updated"))
    return (model._meta.label_lower, row["count"], row["last"], row["updated"])


def _build_fabric(hostnames: dict[int, str]) -> Fabric:
    """Read the fabric tables (six queries, whatever their size) and build the graph of cables between the nodes
    (by id -> hostname) and the switches."""
    switches_by_id: dict[int, SwitchInfo] = {
        switch_id: SwitchInfo(name=name, plane=plane, tier=tier, rack=_rack_name(rack), port_speed_gbps=speed)
        for switch_id, name, plane, tier, rack, speed in Switch.objects.values_list(
            "id", "name", "plane", "tier", "rack__name", "port_speed_gbps"
        )
    }

    nics_by_id: dict[int, NicInfo] = {}
    for nic_id, node_id, name, purpose, speed, mtu, plane, numa, pcie, up in Nic.objects.values_list(
        "id", "node_id", "name", "purpose", "speed_gbps", "mtu", "plane", "numa_node", "pcie_switch", "link_up"
    ):
        nics_by_id[nic_id] = NicInfo(
            hostname=hostnames[node_id],
            name=name,
            purpose=purpose,
            speed_gbps=speed,
            mtu=mtu,
            plane=plane,
            numa_node=numa,
            pcie_switch=pcie,
            link_up=up,
        )

    gpus_by_id: dict[int, GpuInfo] = {}
    gpus: dict[str, list[GpuInfo]] = defaultdict(list)
    for gpu_id, node_id, index, numa, pcie in Gpu.objects.values_list(
        "id", "node_id", "index", "numa_node", "pcie_switch"
    ):
        gpu = GpuInfo(hostname=hostnames[node_id], index=index, numa_node=numa, pcie_switch=pcie)
        gpus_by_id[gpu_id] = gpu
        gpus[gpu.hostname].append(gpu)
    for nic_id, gpu_id in Nic.peer_gpus.through.objects.values_list("nic_id", "gpu_id"):
        nics_by_id[nic_id].peer_gpu_indexes.add(gpus_by_id[gpu_id].index)

    graph = nx.Graph()
    for hostname in hostnames.values():
        graph.add_node(node_key(hostname), kind="node", name=hostname)
    for switch in switches_by_id.values():
        graph.add_node(
            switch.key, kind="switch", name=switch.name, plane=switch.plane, tier=switch.tier, rack=switch.rack
        )

    cable_rows = Cable.objects.values_list(
        "public_id",
        "a_nic_id",
        "a_switch_id",
        "a_port",
        "b_nic_id",
        "b_switch_id",
        "b_port",
        "speed_gbps",
        "measured_gbps",
        "medium",
        "plane",
    )
    cable_count = 0
    for public_id, a_nic, a_switch, a_port, b_nic, b_switch, b_port, speed, measured, medium, plane in cable_rows:
        ends = [
            _end(nics_by_id, switches_by_id, a_nic, a_switch, a_port),
            _end(nics_by_id, switches_by_id, b_nic, b_switch, b_port),
        ]
        (a_key, a_label, a_nicinfo, a_sw), (b_key, b_label, b_nicinfo, b_sw) = ends
        if a_key == b_key:
            continue
        cable_count += 1
        nic_ends = [nic for nic in (a_nicinfo, b_nicinfo) if nic is not None]
        # A link a sweep measured slow counts at its measured rate (Cable.measured_gbps), not its planned one.
        effective = min([speed, measured or speed] + [nic.speed_gbps for nic in nic_ends])
        up = all(nic.link_up for nic in nic_ends)
        switch_planes = [sw.plane for sw in (a_sw, b_sw) if sw is not None]
        link_plane = plane or (switch_planes[0] if switch_planes else (nic_ends[0].plane if nic_ends else ""))
        for nic, far in ((a_nicinfo, b_sw), (b_nicinfo, a_sw)):
            if nic is not None and far is not None:
                nic.switch = far.name
                nic.switch_port = b_port if far is b_sw else a_port
                nic.switch_plane = far.plane
                nic.cable_speed_gbps = speed
        cable = CableInfo(
            cable_id=str(public_id), a=a_label, b=b_label, speed_gbps=effective, up=up, plane=link_plane, medium=medium
        )
        u, v = sorted((a_key, b_key))
        if graph.has_edge(u, v):
            data = graph.edges[u, v]
        else:
            graph.add_edge(u, v, capacity_gbps=0, installed_gbps=0, cables=[], planes=set(), media=set())
            data = graph.edges[u, v]
        data["cables"].append(cable)
        data["installed_gbps"] += effective
        data["capacity_gbps"] += effective if up else 0
        data["planes"].add(link_plane)
        data["media"].add(medium)

    for u, v, data in graph.edges(data=True):
        planes = sorted(data["planes"])
        data["plane"] = planes[0] if len(planes) == 1 else "mixed"
        media = sorted(data["media"])
        data["medium"] = media[0] if len(media) == 1 else "mixed"
        data["kind"] = _edge_kind(u, v)
        data["cables"].sort(key=lambda cable: (cable.a, cable.b))

    nics: dict[str, list[NicInfo]] = defaultdict(list)
    for nic in nics_by_id.values():
        nics[nic.hostname].append(nic)
    for nic_list in nics.values():
        nic_list.sort(key=lambda nic: nic.name)
    for gpu_list in gpus.values():
        gpu_list.sort(key=lambda gpu: gpu.index)

    tiers = [
        StorageTierInfo(
            name=name,
            kind=kind,
            site=site,
            bandwidth_gb_per_s=float(bandwidth),
            required_bandwidth_gb_per_s=float(required),
        )
        for name, kind, site, bandwidth, required in StorageTier.objects.values_list(
            "name", "kind", "site__name", "bandwidth_gb_per_s", "required_bandwidth_gb_per_s"
        )
    ]
    kinds = {kind: i for i, kind in enumerate(StorageTierKind.values)}  # hot, warm, cold
    tiers.sort(key=lambda tier: (tier.site, kinds.get(tier.kind, len(kinds)), tier.name))

    return Fabric(
        graph=graph,
        switches={switch.name: switch for switch in sorted(switches_by_id.values(), key=lambda switch: switch.name)},
        nics=dict(nics),
        gpus=dict(gpus),
        storage_tiers=tiers,
        cable_count=cable_count,
    )


def _end(nics_by_id, switches_by_id, nic_id, switch_id, port):
    """(vertex key, port label, NicInfo or None, SwitchInfo or None) of one cable end."""
    if nic_id is not None:
        nic = nics_by_id[nic_id]
        return node_key(nic.hostname), nic.label, nic, None
    switch = switches_by_id[switch_id]
    return switch.key, f"{switch.name}:{port}", None, switch


def _edge_kind(u: str, v: str) -> str:
    kinds = {u.split(":", 1)[0], v.split(":", 1)[0]}
    if kinds == {"node", "switch"}:
        return "access"
    return "fabric" if kinds == {"switch"} else "direct"


def is_uplink(cluster: ClusterGraph, leaf: str, other_key: str) -> bool:
    """Whether the edge from a leaf to ``other_key`` goes up the fabric (to a spine or another non-leaf switch)."""
    if not other_key.startswith(SWITCH_PREFIX):
        return False
    other = cluster.switches[key_name(other_key)]
    return other.tier != SwitchTier.LEAF and other.tier != SwitchTier.MANAGEMENT and leaf != other.name
