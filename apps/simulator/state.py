"""A simulated node's state: what its hardware is (read from the inventory) and what has gone wrong (its faults).

The tool renderers in apps/simulator/tools read only this state, the seed and the load; nothing else, so clearing a
fault gives back the healthy output byte for byte.
"""

import threading
from dataclasses import dataclass, field, replace

from django.db.models import Q

from apps.inventory.catalogue import GPU_DEVICES, GpuDevice
from apps.inventory.choices import FirmwareComponent, NicPurpose, NicTransport, StorageTierKind
from apps.simulator.digits import is_whole_number
from apps.simulator.sel import POWER_KEY

DRIVER_VERSION = "580.159.04"
CUDA_VERSION = "13.0"
NCCL_VERSION = "2.28.3"  # as on the real H200 node
NCCL_VERSION_CODE = 22803
OPENMPI_VERSION = "4.1.6"
NCCL_TESTS_VERSION = "2.19.6"
KERNEL_RELEASE = "6.8.0-60-generic"
MLX5_DRIVER_VERSION = "24.10-1.1.4"
MAX_CHANNELS = 63  # mlx5's and ice's maximum of combined RSS channels

# The CUDA version each driver branch supports, as nvidia-smi prints it ("CUDA Version").
DRIVER_CUDA = {"535": "12.2", "545": "12.3", "550": "12.4", "555": "12.5", "560": "12.6", "565": "12.7"}
DRIVER_CUDA |= {"570": "12.8", "575": "12.9", "580": "13.0", "590": "13.1"}


def driver_cuda_version(driver: str) -> str:
    """580.159.04 -> '13.0': the newest CUDA the driver's branch runs (an unknown branch: the nearest older one)."""
    branch = driver.split(".")[0]
    known = sorted(DRIVER_CUDA, key=int)
    if not is_whole_number(branch):
        return CUDA_VERSION
    older = [name for name in known if int(name) <= int(branch)]
    return DRIVER_CUDA[older[-1] if older else known[0]]


def cuda_version_code(version: str) -> int:
    """'13.0' -> 13000, as cudaDriverGetVersion reports it."""
    major, _, minor = version.partition(".")
    return int(major) * 1000 + int(minor or 0) * 10


def nccl_version_code(version: str) -> int:
    """'2.28.3' -> 22803 (NCCL_VERSION_CODE since 2.9: major*10000 + minor*100 + patch)."""
    major, minor, patch = ([int(part) for part in version.split(".")[:3] if is_whole_number(part)] + [0, 0, 0])[:3]
    return major * 10000 + minor * 100 + patch if (major, minor) >= (2, 9) else major * 1000 + minor * 100 + patch


def facts_for(sku_name: str, hbm_gib: int, nvlink_gb_per_s: int) -> GpuDevice:
    if sku_name in GPU_DEVICES:
        return GPU_DEVICES[sku_name]
    # A SKU added by an operator: derive what we can, keep the H200's shape for the rest.
    links = 18 if nvlink_gb_per_s >= 900 else (12 if nvlink_gb_per_s else 0)
    per_link = round(nvlink_gb_per_s / 2 / links, 3) if links else 0.0
    return replace(
        GPU_DEVICES["H200 SXM"],
        product_name=f"NVIDIA {sku_name}",
        memory_mib=hbm_gib * 1024 - 1000,
        nvlinks=links,
        nvlink_link_gb_per_s=per_link,
    )


SPARE_ROWS_PER_BANK = 8  # rows an HBM bank holds for remapping uncorrectable ones


@dataclass
class SimGpu:
    index: int  # as in the inventory; nvidia-smi renumbers the visible ones
    uuid: str
    serial: str
    pci_bus_id: str  # 00000000:18:00.0
    numa_node: int
    pcie_switch: str
    vbios: str
    sku_name: str
    architecture: str  # the catalogue's, e.g. Hopper
    facts: GpuDevice  # what the card reports about itself (apps.inventory.catalogue.GPU_DEVICES)
    datasheet_tb_per_s: float
    reference_tb_per_s: float
    tdp_w: int
    pcie_gen_max: int
    min_power_limit_w: int = 200  # the lowest limit the driver accepts (the SKU's); the highest is the TDP
    # What faults change:
    present: bool = True
    nvlinks_down: list[int] = field(default_factory=list)
    ecc_uncorrectable: int = 0
    remap_pending: bool = False
    thermal_c: int | None = None  # a thermal slowdown holds the GPU at this temperature
    pcie_gen: int | None = None
    pcie_width: int = 16
    clock_cap_mhz: int | None = None  # a straggler's lowered application clocks
    power_limit_w: int | None = None  # a power cap set below the board's TDP (nvidia-smi -pl, a BMC policy)
    # A cooling fault that shows only under sustained load: after this many seconds of it, the GPU reaches
    # late_thermal_c and HW thermal slowdown sets in (a clogged filter, a failing fan of the chassis).
    late_thermal_after_s: float | None = None
    late_thermal_c: int | None = None
    # A multi-node NVLink fabric's (a rack-scale domain's): what `nvidia-smi -q` prints under Fabric; None outside one.
    fabric_cluster_uuid: str | None = None
    fabric_clique_id: int | None = None

    @property
    def power_cap_w(self) -> int:
        """The enforced power limit: the default (TDP) unless a cap lowered it."""
        return min(self.tdp_w, self.power_limit_w or self.tdp_w)

    @property
    def active_nvlinks(self) -> int:
        return self.facts.nvlinks - len(self.nvlinks_down)

    @property
    def remap_failed(self) -> bool:
        """More uncorrectable rows than a bank's spare rows: the remapper cannot take them all (nvidia-smi -q's
        "Remapping Failure Occurred: Yes", DCGM_FI_DEV_ROW_REMAP_FAILURE 1)."""
        return self.ecc_uncorrectable > SPARE_ROWS_PER_BANK

    @property
    def link_gen(self) -> int:
        return self.pcie_gen or self.pcie_gen_max

    @property
    def bus(self) -> str:
        return self.pci_bus_id.split(":")[1]

    @property
    def short_bus_id(self) -> str:
        """0000:18:00 as nccl-tests and the kernel print it."""
        return f"0000:{self.bus.lower()}:00"


@dataclass
class SimNic:
    name: str
    mac: str
    purpose: str
    speed_gbps: int
    mtu: int
    transport: str
    rdma: bool
    pfc_priorities: list[int]
    ecn: bool
    numa_node: int
    pci_address: str
    pcie_switch: str
    firmware: str
    link_up: bool
    cable_speed_gbps: int | None
    rdma_device: str | None = None  # mlx5_N for RDMA NICs
    trust: str = "pcp"  # mlnx_qos priority trust state: dscp or pcp
    channels: int = MAX_CHANNELS  # combined RSS channels now (ethtool -l)
    max_channels: int = MAX_CHANNELS
    crc_errors_per_million: int = 0  # frames the link corrupts (a degraded cable); RoCE resends what follows them
    traffic_bytes: int = 0  # RDMA bytes received since boot by the commands run (nccl-tests across nodes)

    @property
    def is_data(self) -> bool:
        return self.purpose == NicPurpose.DATA

    @property
    def effective_speed_gbps(self) -> int:
        return min(self.speed_gbps, self.cable_speed_gbps or self.speed_gbps)


@dataclass
class SimVolume:
    mount_point: str
    capacity_gb: int
    kind: str  # hot / warm / cold, or "system" for the boot disk
    full: bool = False
    freed_bytes: int = 0  # what removals freed on it since (a full volume then has that much free)
    stalled: bool = False  # its server (NFS, Lustre) or array stopped answering: every read on it blocks

    @property
    def is_local(self) -> bool:
        return self.kind in ("system", StorageTierKind.HOT)


@dataclass
class SimCheckpoint:
    path: str
    size_bytes: int
    corrupt: bool = False


@dataclass
class SimPeer:
    """A node of the tray's IMEX domain, as nvidia-imex-ctl lists it (its address from the inventory)."""

    hostname: str
    address: str


@dataclass
class SimDomain:
    """The rack-scale NVLink domain a compute tray belongs to, as the tray's tools see it: the fabric (cluster UUID,
    clique id, each GPU's links over the switch trays), its IMEX domain, and what has gone wrong across the domain
    (a switch tray down, an IMEX peer lost) whichever tray the fault was injected on."""

    name: str
    cluster_uuid: str
    clique_id: int | None  # the NVLink partition's id; None outside any partition
    tray_slot: int
    switch_trays: int
    links_per_switch_tray: int
    imex_peers: list[SimPeer]
    tray_design_flow_lpm: float | None = None  # the rack loop's design flow shared over its compute trays
    max_return_c: float = 55.0  # the loop's return temperature limit
    # Faults injected on the other trays: (kind, target, parameters, when it struck).
    shared_faults: list[tuple[str, str, dict, float]] = field(default_factory=list)
    switch_trays_down: set[int] = field(default_factory=set)
    imex_lost: set[str] = field(default_factory=set)  # hostnames whose IMEX daemon the others lost

    def switch_tray_links(self, slot: int) -> list[int]:
        """The links of every GPU that land on switch tray `slot` (2 of 18 on NVL72: links 0-1 on tray 1, ...)."""
        first = (slot - 1) * self.links_per_switch_tray
        return list(range(first, first + self.links_per_switch_tray))


@dataclass
class SimulatedNode:
    """One node as the simulator sees it."""

    hostname: str
    node_id: int | None
    cpu_model: str
    sockets: int
    cores: int
    memory_gib: int
    numa_nodes: int
    bios: str
    bmc: str
    gpus: list[SimGpu]
    nics: list[SimNic]
    volumes: list[SimVolume]
    checkpoints: list[SimCheckpoint]
    leaf_uplink_ratio: float = 1.0  # uplink / downlink capacity of the node's leaves; below 1 is oversubscribed
    pod: int = 0  # in a three-tier fabric, which pod the node's leaves are in (0: two tiers, or unknown)
    core_uplink_ratio: float = 1.0  # the same ratio for the pod's spines towards the core (for rings across pods)
    straggler: bool = False
    dataloader_stall: tuple[int, int] | None = None  # (period s, stall %) of a starving input pipeline
    co_located_pod: str = ""  # a second trainer the scheduler put on the node
    co_located_speed: float = 1.0  # of the job's ranks on the node, sharing it with that trainer
    faults: list[tuple[str, str]] = field(default_factory=list)
    # Installed software and written files (what deployments change):
    driver_version: str = DRIVER_VERSION
    cuda_toolkit: str = CUDA_VERSION
    nccl_version: str = NCCL_VERSION
    openmpi_version: str = OPENMPI_VERSION
    python_packages: dict[str, str] = field(default_factory=dict)  # torch, tensorflow: version
    files: dict[str, str] = field(default_factory=dict)  # absolute path: content
    relocated: dict[str, str] = field(default_factory=dict)  # where `mv` put a modelled file: first path -> now
    ptp_synchronised: bool = True
    boot: dict | None = None  # the last simulated reboot (apps/simulator/boot.py); None: up since before it
    booted_at: float | None = None  # when the node first came up: its inventory row's creation (the kernel log's start)
    # When each applied fault struck, by (kind, target): the kernel log stamps its lines then.
    fault_since: dict[tuple[str, str], float] = field(default_factory=dict)
    # On a scheduler controller: what slurmctld keeps per node beyond its load (drain, reason, reboot requested).
    slurm_nodes: dict[str, dict] = field(default_factory=dict)
    # And what the Kubernetes API server keeps per node beyond its kubelet's report (cordon, taints, conditions
    # another detector set): apps/simulator/tools/kube_apiserver.py.
    kube_nodes: dict[str, dict] = field(default_factory=dict)
    domain: SimDomain | None = None  # a compute tray's rack-scale NVLink domain
    coolant_flow_pct: int = 100  # of the rack loop's design flow, at this tray's inlet (liquid-cooled trays)
    leak_detected: bool = False  # the tray's leak detector
    os_hung: bool = False  # the kernel hung: the node answers nothing, its BMC still does
    powered_off: bool = False  # its BMC turned the chassis off: no host, no GPUs, only the BMC's standby sensors

    @property
    def driver_cuda(self) -> str:
        """The CUDA version nvidia-smi reports: the one the driver's branch supports."""
        return driver_cuda_version(self.driver_version)

    @property
    def visible_gpus(self) -> list[SimGpu]:
        return [gpu for gpu in self.gpus if gpu.present]

    @property
    def lost_gpus(self) -> list[SimGpu]:
        return [gpu for gpu in self.gpus if not gpu.present]

    @property
    def data_nics(self) -> list[SimNic]:
        return [nic for nic in self.nics if nic.is_data]

    @property
    def rdma_nics(self) -> list[SimNic]:
        return [nic for nic in self.nics if nic.rdma_device]

    def gpu(self, index: int) -> SimGpu | None:
        return next((gpu for gpu in self.gpus if gpu.index == index), None)

    def nic(self, name: str) -> SimNic | None:
        return next((nic for nic in self.nics if nic.name == name), None)

    def volume(self, mount_point: str) -> SimVolume | None:
        return next((volume for volume in self.volumes if volume.mount_point == mount_point), None)

    @property
    def threads_per_core(self) -> int:
        if "Grace" in self.cpu_model:
            return 1  # Neoverse V2 cores have no SMT: a GB200 tray's 144 cores are 144 CPUs
        return 2 if self.cores else 1

    @property
    def cpu_count(self) -> int:
        return max(self.cores, 1) * self.threads_per_core

    def numa_cpus(self, numa: int) -> list[int]:
        """Linux numbers first threads 0..cores-1 by socket, then the sibling threads; NUMA nodes split each half."""
        cores = max(self.cores, 1)
        per_node = cores // self.numa_nodes
        first = list(range(numa * per_node, (numa + 1) * per_node))
        if self.threads_per_core == 1:
            return first
        return first + [cpu + cores for cpu in first]


CHECKPOINT_DIR = "/checkpoints/llm-pretrain"
CHECKPOINT_STEPS = (1000, 2000, 3000, 4000, 5000)
CHECKPOINT_BYTES = 17_179_869_184 + 4_194_304  # a 16 GiB shard plus optimizer metadata


def checkpoint_files(volumes: list[SimVolume]) -> list[SimCheckpoint]:
    """Every 1000 steps the training job writes a checkpoint (as the design brief asks)."""
    if not any(volume.mount_point == "/checkpoints" for volume in volumes):
        return []
    return [SimCheckpoint(f"{CHECKPOINT_DIR}/step_{step:07d}.pt", CHECKPOINT_BYTES) for step in CHECKPOINT_STEPS]


def build_state(
    node, leaf_ratios: dict[int, float] | None = None, leaf_pods: dict[int, tuple[int, float]] | None = None
) -> "SimulatedNode":
    """The healthy state of an inventory Node (faults are applied by apps.simulator.faults.node). Building many,
    pass leaf_uplink_ratios() and leaf_pods() of their leaves, asked once."""
    firmware = {(fw.component, fw.target): fw.version for fw in node.firmware.all()}
    gpus = [_sim_gpu(gpu, firmware) for gpu in sorted(node.gpus.all(), key=lambda gpu: gpu.index)]
    nics = _sim_nics(node, firmware)
    volumes = [SimVolume("/", 960, "system")]
    volumes += [
        SimVolume(volume.mount_point, volume.capacity_gb, volume.tier.kind)
        for volume in sorted(node.volumes.all(), key=lambda volume: volume.mount_point)
    ]
    state = SimulatedNode(
        hostname=node.hostname,
        node_id=node.pk,
        cpu_model=node.cpu_model or "Intel(R) Xeon(R) Platinum 8480+",
        sockets=node.cpu_sockets or 1,
        cores=node.cpu_cores or 16,
        memory_gib=node.memory_gib or 64,
        numa_nodes=max(node.numa_nodes, 1),
        bios=firmware.get((FirmwareComponent.BIOS, ""), "1.0.0"),
        bmc=firmware.get((FirmwareComponent.BMC, ""), "1.0.0"),
        gpus=gpus,
        nics=nics,
        volumes=volumes,
        checkpoints=checkpoint_files(volumes),
        leaf_uplink_ratio=_leaf_uplink_ratio(node, leaf_ratios),
        domain=_sim_domain(node) if node.nvlink_domain_id else None,
        booted_at=node.created.timestamp() if getattr(node, "created", None) else None,
    )
    state.pod, state.core_uplink_ratio = _pod(node, leaf_pods)
    for nic in state.nics:
        nic.channels = min(nic.max_channels, state.cpu_count)
    if state.domain is not None:
        for gpu in state.gpus:
            gpu.fabric_cluster_uuid, gpu.fabric_clique_id = state.domain.cluster_uuid, state.domain.clique_id
    return state


def _sim_domain(node) -> SimDomain:
    """The tray's view of its NVLink domain, in a few queries: the domain, the tray's partition, its IMEX domain's
    nodes, the rack's coolant loop, and the faults injected on the other trays (a switch tray down shows on every
    tray)."""
    domain = node.nvlink_domain
    spec = domain.spec
    partition = node.nvlink_partitions.filter(domain=domain).order_by("partition_id").first()
    imex = node.imex_domains.filter(domain=domain).order_by("name").first()
    members = imex.nodes.order_by("tray_slot", "hostname") if imex else []
    others = domain.compute_trays.exclude(pk=node.pk).prefetch_related("sim_faults")
    loop = domain.rack.coolant_loops.order_by("name").first()
    # A tray its BMC turned off has no IMEX daemon: the others read it lost, as for a daemon that died.
    powers = others.filter(sim_changes__key=POWER_KEY).values_list("hostname", "sim_changes__value")
    off = {hostname for hostname, value in powers if not (value or {}).get("on", True)}
    return SimDomain(
        name=domain.name,
        cluster_uuid=str(domain.cluster_uuid),
        clique_id=partition.partition_id if partition else None,
        tray_slot=node.tray_slot or 0,
        switch_trays=spec.switch_trays,
        links_per_switch_tray=spec.links_per_switch_tray,
        imex_peers=[SimPeer(member.hostname, member.management_ip or member.hostname) for member in members],
        tray_design_flow_lpm=float(loop.design_flow_lpm) / spec.compute_trays if loop else None,
        max_return_c=float(loop.max_return_c) if loop else 55.0,
        shared_faults=[
            (fault.kind, fault.target, fault.parameters, fault.created.timestamp())
            for tray in others
            for fault in tray.sim_faults.all()
        ],
        imex_lost=off,
    )


def _sim_gpu(gpu, firmware: dict) -> SimGpu:
    sku = gpu.sku
    index = gpu.index
    return SimGpu(
        index=index,
        uuid=gpu.uuid or f"GPU-00000000-0000-0000-0000-{gpu.node_id:06d}{index:06d}",
        serial=gpu.serial or f"1650000{gpu.node_id:04d}{index:02d}",
        pci_bus_id=_long_bus_id(gpu.pci_bus_id, index),
        numa_node=gpu.numa_node or 0,
        pcie_switch=gpu.pcie_switch,
        vbios=firmware.get((FirmwareComponent.GPU_VBIOS, f"GPU{index}"), "96.00.A5.00.1A"),
        sku_name=sku.name,
        architecture=sku.architecture,
        facts=facts_for(sku.name, sku.hbm_gib, sku.nvlink_gb_per_s),
        datasheet_tb_per_s=float(sku.mem_bandwidth_tb_per_s),
        reference_tb_per_s=float(sku.mem_bandwidth_reference_tb_per_s),
        tdp_w=sku.tdp_w,
        pcie_gen_max=sku.pcie_gen,
        min_power_limit_w=min(sku.min_power_limit_w, sku.tdp_w),
    )


def _long_bus_id(value: str, index: int) -> str:
    """nvidia-smi's 00000000:18:00.0 from the inventory's 0000:18:00.0 or 00000000:18:00.0."""
    if not value:
        return f"00000000:{0x18 + 0x10 * index:02X}:00.0"
    domain, bus, rest = value.split(":") if value.count(":") == 2 else ("0", *value.split(":"))
    return f"{int(domain, 16):08X}:{bus.upper()}:{rest.upper()}"


def _sim_nics(node, firmware: dict) -> list[SimNic]:
    nics = []
    rdma_index = 0
    for nic in sorted(node.nics.all(), key=lambda nic: (nic.purpose != NicPurpose.DATA, nic.name)):
        cable = getattr(nic, "cable_as_a", None) or getattr(nic, "cable_as_b", None)
        sim = SimNic(
            name=nic.name,
            mac=nic.mac or "0c:42:a1:00:00:00",
            purpose=nic.purpose,
            speed_gbps=nic.speed_gbps,
            mtu=nic.mtu,
            transport=nic.transport,
            rdma=nic.rdma_capable,
            pfc_priorities=sorted(nic.pfc_priorities or []),
            ecn=nic.ecn_enabled,
            numa_node=nic.numa_node or 0,
            pci_address=nic.pci_address.lower(),
            pcie_switch=nic.pcie_switch,
            firmware=firmware.get((FirmwareComponent.NIC_FIRMWARE, nic.name), "28.41.1000"),
            link_up=nic.link_up,
            cable_speed_gbps=cable.speed_gbps if cable else None,
            trust="dscp" if nic.rdma_capable else "pcp",
        )
        if nic.rdma_capable and nic.transport in (NicTransport.ROCE, NicTransport.INFINIBAND):
            sim.rdma_device = f"mlx5_{rdma_index}"
            rdma_index += 1
        nics.append(sim)
    return nics


def data_leaves(node) -> set[int]:
    """The switches this node's data NICs are cabled to (their b end)."""
    leaves = set()
    for nic in node.nics.all():
        cable = getattr(nic, "cable_as_a", None)
        if nic.purpose == NicPurpose.DATA and cable is not None and cable.b_switch_id:
            leaves.add(cable.b_switch_id)
    return leaves


def leaf_uplink_ratios(leaf_ids) -> dict[int, float]:
    """Uplink over downlink bandwidth (at most 1.0) of each leaf that has both, in three grouped queries for any
    number of leaves: building many nodes' states asks once, not four times a node."""
    from django.db.models import Sum

    from apps.inventory.models import Cable

    leaf_ids = list(leaf_ids)
    down = dict(
        Cable.objects.filter(b_switch_id__in=leaf_ids, a_nic__isnull=False)
        .values("b_switch_id")
        .annotate(total=Sum("speed_gbps"))
        .values_list("b_switch_id", "total")
    )
    up: dict[int, int] = {}
    switch_to_switch = Cable.objects.filter(a_nic__isnull=True, b_nic__isnull=True)
    for end in ("a_switch_id", "b_switch_id"):
        totals = (
            switch_to_switch.filter(**{f"{end}__in": leaf_ids})
            .values(end)
            .annotate(total=Sum("speed_gbps"))
            .values_list(end, "total")
        )
        for leaf_id, total in totals:
            up[leaf_id] = up.get(leaf_id, 0) + total
    return {leaf: min(1.0, up[leaf] / down[leaf]) for leaf in down if down[leaf] and up.get(leaf)}


def leaf_pods(leaf_ids) -> dict[int, tuple[int, float]]:
    """In a three-tier fabric, per leaf: its pod (named by the lowest id of the spines it is cabled to) and the lowest
    uplink over downlink bandwidth (at most 1.0) of those spines towards the core, which a ring across pods crosses
    (leaf, spine, core, spine, leaf). Leaves whose spines have no core above them are left out. Two queries."""
    from apps.inventory.choices import SwitchTier
    from apps.inventory.models import Cable

    leaf_ids = set(leaf_ids)
    spines_of: dict[int, set[int]] = {}
    between = Cable.objects.filter(a_switch__isnull=False, b_switch__isnull=False)
    for a, b in between.filter(
        Q(a_switch_id__in=leaf_ids, b_switch__tier=SwitchTier.SPINE)
        | Q(b_switch_id__in=leaf_ids, a_switch__tier=SwitchTier.SPINE)
    ).values_list("a_switch_id", "b_switch_id"):
        leaf, spine = (a, b) if a in leaf_ids else (b, a)
        spines_of.setdefault(leaf, set()).add(spine)
    spines = set().union(*spines_of.values())
    down: dict[int, int] = {}
    up: dict[int, int] = {}
    for a, b, a_tier, b_tier, speed in between.filter(
        Q(a_switch_id__in=spines) | Q(b_switch_id__in=spines)
    ).values_list("a_switch_id", "b_switch_id", "a_switch__tier", "b_switch__tier", "speed_gbps"):
        for spine, other in ((a, b_tier), (b, a_tier)):
            if spine in spines and other == SwitchTier.LEAF:
                down[spine] = down.get(spine, 0) + speed
            elif spine in spines and other == SwitchTier.CORE:
                up[spine] = up.get(spine, 0) + speed
    ratios = {spine: min(1.0, up[spine] / down[spine]) for spine in up if down.get(spine)}
    return {
        leaf: (min(above), min(ratios[spine] for spine in above if spine in ratios))
        for leaf, above in spines_of.items()
        if any(spine in ratios for spine in above)
    }


class FabricReads:
    """The leaves' uplink ratios and pods, each leaf read once for the sessions that share this object (one
    fan-out's: a job's 256 nodes sit behind a few dozen leaves, and the inventory does not change under a job)."""

    def __init__(self):
        self.ratios: dict[int, float] = {}
        self.pods: dict[int, tuple[int, float]] = {}
        self._read: set[int] = set()
        self._lock = threading.Lock()  # the sim transport's sessions answer in threads

    def of(self, leaves) -> tuple[dict[int, float], dict[int, tuple[int, float]]]:
        """Ratios and pods covering these leaves (as leaf_uplink_ratios and leaf_pods answer for them)."""
        with self._lock:
            unread = set(leaves) - self._read
            if unread:
                self.ratios.update(leaf_uplink_ratios(unread))
                self.pods.update(leaf_pods(unread))
                self._read |= unread
            return self.ratios, self.pods


def _pod(node, pods: dict[int, tuple[int, float]] | None) -> tuple[int, float]:
    """The node's pod and its spines' core uplink ratio ((0, 1.0) in two tiers or when unknown)."""
    leaves = data_leaves(node)
    if pods is None:
        pods = leaf_pods(leaves)
    known = [pods[leaf] for leaf in leaves if leaf in pods]
    return (min(pod for pod, _ in known), min(ratio for _, ratio in known)) if known else (0, 1.0)


def _leaf_uplink_ratio(node, ratios: dict[int, float] | None) -> float:
    """The lowest uplink ratio of the leaves this node reaches (1.0 when non-blocking or unknown)."""
    leaves = data_leaves(node)
    if ratios is None:
        ratios = leaf_uplink_ratios(leaves)
    known = [ratios[leaf] for leaf in leaves if leaf in ratios]
    return min(known) if known else 1.0
