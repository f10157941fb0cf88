"""The figures the simulated tools print, from a model of the hardware rather than from dice.

Calibrated on the real H200 capture (tests/fixtures/real/h200-1gpu): idle at 345 MHz and ~78 W; under a GEMM loop the
card sits at its 700 W cap with the SW-power-cap clocks-event reason and SM clocks near 1450 MHz; a device-to-device
copy moves 4.21 TB/s, 88% of the 4.8 TB/s datasheet; pinned host<->device copies reach 55 GB/s on PCIe Gen5 x16.
Seeded noise (a fraction of a percent) is added on top; it never is the figure itself.
"""

import math
import random
import zlib
from dataclasses import dataclass, replace

from apps.inventory.catalogue import GpuCompute, compute_of
from apps.inventory.gpu_power import DEFAULT_GPU_POWER_MODEL, GpuPowerModel, gpu_power_model
from apps.simulator.state import SimGpu, SimNic, SimulatedNode

# --- noise ------------------------------------------------------------------------------------------------------


def noise(seed: int, *keys) -> random.Random:
    """A generator for one reading: the same seed and keys give the same numbers in every process."""
    key = zlib.crc32("|".join(str(part) for part in keys).encode())
    return random.Random(seed ^ key)


def jitter(rng: random.Random, value: float, share: float) -> float:
    """value within ±share of itself."""
    return value * (1 + rng.uniform(-share, share))


# --- power, clocks, temperature ---------------------------------------------------------------------------------

CLOCK_STEP_MHZ = 15  # Hopper's supported graphics clocks come in 15 MHz steps
# The board power model is the SKU catalogue's (apps/inventory/gpu_power.py): each GPU draws by its SKU's figures.
# These names are the measured card's, for the telemetry model, which works per regime rather than per SKU (every
# shipped SKU has the same figures until measured).
STATIC_POWER_W = DEFAULT_GPU_POWER_MODEL.static_w
IDLE_POWER_W = DEFAULT_GPU_POWER_MODEL.idle_w
THERMAL_SLOWDOWN_MHZ = 990  # HW thermal slowdown roughly halves the boost clock

# The card's side of nvmlClocksEventReasons (nvml.h): the bit the simulated card sets for each reason it names. The
# table the project reads masks with is the parsers' (apps.parsers.nvidia_smi.CLOCKS_EVENT_REASON_BITS); the simulator
# may not import it (its output is judged by the parsers), so tests/simulator/test_parsers.py holds the two equal.
REASON_BITS = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}
REASONS_SUPPORTED_MASK = sum(REASON_BITS.values())  # what 'clocks_event_reasons.supported' prints: every reason


@dataclass(frozen=True)
class GpuReading:
    """One GPU at one moment: what nvidia-smi, dmon and NVML would read."""

    power_w: float  # instantaneous
    power_avg_w: float
    power_cap_w: float
    temperature_c: int
    memory_temperature_c: int
    sm_mhz: int
    mem_mhz: int
    util_gpu: int
    util_mem: int
    reasons: tuple[str, ...]
    power_capped: bool

    @property
    def reasons_mask(self) -> int:
        return sum(REASON_BITS[name] for name in self.reasons)


def power_demand_w(load: float, sm_mhz: float, power: GpuPowerModel = DEFAULT_GPU_POWER_MODEL) -> float:
    return power.demand_w(load, sm_mhz)


def clock_at_power_cap(load: float, cap_w: float, power: GpuPowerModel = DEFAULT_GPU_POWER_MODEL) -> float:
    """The SM clock at which a load draws exactly the cap (the power-capping governor's target)."""
    return power.clock_at_limit_mhz(load, cap_w)


def quantise_clock(mhz: float) -> int:
    """Down to the clock step: the governor never runs above the clock it was asked for."""
    return int(mhz // CLOCK_STEP_MHZ * CLOCK_STEP_MHZ)


def gpu_reading(gpu: SimGpu, *, load: float, rng: random.Random) -> GpuReading:
    """Power, clocks and temperature of a GPU under a load between 0 (idle) and 1 (a GEMM loop)."""
    facts = gpu.facts
    board = gpu_power_model(gpu.sku_name)
    cap = float(gpu.power_cap_w)
    reasons: list[str] = []
    offset = rng.uniform(-3, 3)  # cards differ by a few degrees in the same chassis
    if load <= 0:
        sm = float(facts.idle_sm_mhz)
        power = jitter(rng, board.idle_w, 0.02)
        average = power + jitter(rng, 28.0, 0.1)  # the average includes the sampler's own wake-ups
        reasons.append("gpu_idle")
        capped = False
    else:
        max_clock = float(min(facts.max_sm_mhz, gpu.clock_cap_mhz or facts.max_sm_mhz))
        demand = board.demand_w(load, max_clock)
        capped = demand > cap
        sm = min(max_clock, board.clock_at_limit_mhz(load, cap)) if capped else max_clock
        sm = min(jitter(rng, sm, 0.008), max_clock)
        power = min(board.demand_w(load, sm), cap - rng.uniform(8, 12)) if capped else jitter(rng, demand, 0.01)
        average = power + rng.uniform(-1.5, 1.5)
        if gpu.clock_cap_mhz and gpu.clock_cap_mhz < facts.max_sm_mhz:
            reasons.append("applications_clocks_setting")
        if capped:
            reasons.append("sw_power_cap")
    if gpu.thermal_c:
        sm = min(sm, THERMAL_SLOWDOWN_MHZ) if load > 0 else sm
        reasons += ["hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown"]
        temperature = gpu.thermal_c + rng.uniform(-1, 1)
        if load > 0:
            power = min(power, board.demand_w(load, sm))
            reasons = [name for name in reasons if name != "sw_power_cap"]
            capped = False
    else:
        temperature = 33 + 0.034 * power + offset
    return GpuReading(
        power_w=round(power, 2),
        power_avg_w=round(average, 2),
        power_cap_w=cap,
        temperature_c=int(round(temperature)),
        memory_temperature_c=int(round(33 + 0.02 * power + offset / 2)),
        sm_mhz=quantise_clock(sm),
        mem_mhz=facts.memory_mhz,
        util_gpu=100 if load > 0 else 0,
        util_mem=int(round(22 * load)),
        reasons=tuple(sorted(reasons, key=REASON_BITS.__getitem__)),
        power_capped=capped,
    )


# --- memory and links -------------------------------------------------------------------------------------------

HBM_COPY_EFFICIENCY = 0.877  # 4.21 of 4.8 TB/s measured on the real H200
NVLINK_COPY_EFFICIENCY = 0.82  # copy-engine peer copies over NVLink reach ~82% of the links' raw rate
PCIE_LANE_GB_PER_S = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
PCIE_EFFICIENCY = 0.875  # 55 GB/s pinned copies measured on Gen5 x16
DEGRADED_CLOCK_MEMORY_SHARE = 0.85  # a throttled or straggling card also streams memory slower


def hbm_copy_tb_per_s(gpu: SimGpu, straggler: bool = False) -> float:
    """Device-to-device copy bandwidth (bytes read + written) of one GPU's HBM."""
    value = gpu.datasheet_tb_per_s * HBM_COPY_EFFICIENCY
    if gpu.thermal_c or straggler:
        value *= DEGRADED_CLOCK_MEMORY_SHARE
    return value


def nvlink_gb_per_s(gpu: SimGpu) -> float:
    """Raw NVLink bandwidth out of one GPU, one direction."""
    return gpu.active_nvlinks * gpu.facts.nvlink_link_gb_per_s


def peer_copy_gb_per_s(a: SimGpu, b: SimGpu) -> float:
    """Copy-engine bandwidth from a to b through the NVSwitches: the GPU with fewer working links sets it."""
    return min(nvlink_gb_per_s(a), nvlink_gb_per_s(b)) * NVLINK_COPY_EFFICIENCY


def pcie_gb_per_s(gpu: SimGpu) -> float:
    """Pinned host<->device copy bandwidth over the GPU's PCIe link as trained."""
    return PCIE_LANE_GB_PER_S[gpu.link_gen] * gpu.pcie_width * PCIE_EFFICIENCY


# --- compute: GEMM rate, HPL-MxP, gpu-burn --------------------------------------------------------------------


GEMM_EFFICIENCY = 0.965  # the real H200: bf16 GEMM 755 TFLOP/s at ~1455 MHz = 96.5 % of 132 x 4096 x 1455 MHz
SGEMM_EFFICIENCY = 0.75  # gpu_burn's FP32 SGEMM loop reaches about three quarters of the vector FMA peak


def compute_facts(gpu: SimGpu) -> GpuCompute:
    return compute_of(sku_name=gpu.sku_name, architecture=gpu.architecture)


def loaded_sm_mhz(gpu: SimGpu, *, hot: bool = False) -> float:
    """The SM clock under a sustained GEMM load: the TDP's clock, lower under a lower power limit (dynamic power
    ~ f^2.5), capped application clocks, and HW thermal slowdown when the GPU is hot."""
    compute = compute_facts(gpu)
    clock = float(compute.loaded_sm_mhz)
    limit = gpu.power_limit_w or gpu.tdp_w
    if limit < gpu.tdp_w:
        clock *= gpu_power_model(gpu.sku_name).clock_share(limit_w=limit, busy_w=gpu.tdp_w)
    if gpu.clock_cap_mhz:
        clock = min(clock, gpu.clock_cap_mhz)
    if gpu.thermal_c or hot:
        clock = min(clock, THERMAL_SLOWDOWN_MHZ)
    return float(quantise_clock(clock))


def gemm_tflops(gpu: SimGpu, *, fp32: bool = False, hot: bool = False) -> float:
    compute = compute_facts(gpu)
    per_clock = compute.fp32_flops_per_clock_sm if fp32 else compute.fp16_flops_per_clock_sm
    efficiency = SGEMM_EFFICIENCY if fp32 else GEMM_EFFICIENCY
    return compute.sms * per_clock * loaded_sm_mhz(gpu, hot=hot) * 1e6 * efficiency / 1e12


# HPL-MxP: an FP16 LU factorisation (GEMM-bound, each panel step costing a fixed latency and, across nodes, the
# panel's broadcast), then GMRES refinement in FP64 (HBM-bound). Calibrated on two real 8 x H100 runs, LU at 311.7 and
# 317 TFLOPS per GPU (docs/benchmarks.md), i.e. ~0.42 of the GEMM rate.
HPL_MXP_LU_EFFICIENCY = 0.48
HPL_MXP_PANEL_S = 0.003
HPL_MXP_REFINE_S = 0.056  # one refinement's fixed cost: 0.17 s for 3 in the real A100 run at N = 10000
HPL_MXP_REFINE_ITERATIONS = 3
HPL_MXP_MATVECS = 10  # FP64 matrix-vector products per refinement (GMRES inner steps)


@dataclass(frozen=True)
class HplMxpTimes:
    lu_s: float
    solver_s: float
    flops: float

    @property
    def gflops(self) -> float:
        return self.flops / (self.lu_s + self.solver_s) / 1e9

    @property
    def lu_gflops(self) -> float:
        return self.flops / self.lu_s / 1e9


def hpl_mxp_times(n: int, nb: int, gpus: list[SimGpu], broadcast_gb_per_s: float) -> HplMxpTimes:
    """One HPL-MxP solve of order n over `gpus` (bulk-synchronous: the slowest GPU sets the pace of every step);
    `broadcast_gb_per_s` is what a panel crosses between GPUs (NVLink in a node, the node's NICs across nodes)."""
    flops = 2 / 3 * n**3 + 3 / 2 * n**2
    count = len(gpus)
    rate = min(gemm_tflops(gpu) for gpu in gpus) * 1e12 * count * HPL_MXP_LU_EFFICIENCY
    panels = math.ceil(n / nb)
    broadcast = n * nb * 2 / (broadcast_gb_per_s * 1e9) if count > 1 and broadcast_gb_per_s > 0 else 0.0
    lu = 2 / 3 * n**3 / rate + panels * (HPL_MXP_PANEL_S + broadcast)
    hbm = min(hbm_copy_tb_per_s(gpu) for gpu in gpus) * 1e12 * count
    solver = HPL_MXP_REFINE_ITERATIONS * (HPL_MXP_REFINE_S + HPL_MXP_MATVECS * 8 * n**2 / hbm)
    return HplMxpTimes(lu, solver, flops)


# Classic HPL (FP64): the LU at the GPUs' tensor-core DGEMM rate at the loaded clock, each panel step a fixed cost
# plus, across GPUs, the panel's broadcast (FP64: 8 bytes an element). Not calibrated on a real GPU run of ours:
# 0.9 of the DGEMM rate is what NVIDIA's HPL typically reaches of Rpeak on one node.
HPL_EFFICIENCY = 0.9
HPL_PANEL_S = 0.004


def dgemm_tflops(gpu: SimGpu, *, hot: bool = False) -> float:
    compute = compute_facts(gpu)
    return compute.sms * compute.fp64_flops_per_clock_sm * loaded_sm_mhz(gpu, hot=hot) * 1e6 / 1e12


def hpl_seconds(n: int, nb: int, gpus: list[SimGpu], broadcast_gb_per_s: float) -> float:
    """One classic HPL solve of order n over `gpus`, the slowest GPU setting the pace of every step."""
    rate = min(dgemm_tflops(gpu) for gpu in gpus) * 1e12 * len(gpus) * HPL_EFFICIENCY
    broadcast = n * nb * 8 / (broadcast_gb_per_s * 1e9) if len(gpus) > 1 and broadcast_gb_per_s > 0 else 0.0
    return 2 / 3 * n**3 / rate + math.ceil(n / nb) * (HPL_PANEL_S + broadcast)


# A soak's temperature: from idle towards the loaded steady state with the chassis' thermal time constant.
SOAK_TIME_CONSTANT_S = 90.0
IDLE_TEMPERATURE_C = 36.0


def soak_reading(gpu: SimGpu, elapsed_s: float, rng: random.Random) -> GpuReading:
    """A GPU `elapsed_s` seconds into a sustained GEMM load (gpu_burn): warming up, at its power limit, and hot
    with HW thermal slowdown once a late-thermal fault's delay has passed."""
    late = gpu.late_thermal_after_s is not None and elapsed_s >= gpu.late_thermal_after_s
    state = replace(gpu, thermal_c=gpu.late_thermal_c) if late else gpu
    now = gpu_reading(state, load=1.0, rng=rng)
    if not (late or gpu.thermal_c):
        warm = 1 - math.exp(-elapsed_s / SOAK_TIME_CONSTANT_S)
        temperature = IDLE_TEMPERATURE_C + (now.temperature_c - IDLE_TEMPERATURE_C) * warm
        now = replace(now, temperature_c=int(round(temperature)))
    return replace(now, sm_mhz=int(loaded_sm_mhz(state)))


# --- NCCL -------------------------------------------------------------------------------------------------------

# Bus-bandwidth factors from nccl-tests' doc/PERFORMANCE.md: busbw = algbw * factor(n).
BUSBW_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}
# Ring steps a collective takes, each paying one hop's latency.
RING_STEPS = {
    "all_reduce": lambda n: 2 * (n - 1),
    "all_gather": lambda n: n - 1,
    "reduce_scatter": lambda n: n - 1,
    "alltoall": lambda n: n - 1,
    "broadcast": lambda n: n - 1,
    "reduce": lambda n: n - 1,
    "sendrecv": lambda n: 1,
}
NCCL_NVLINK_EFFICIENCY = 0.78  # ring all_reduce on 8 Hopper GPUs reaches ~370 GB/s busbw of 478 GB/s raw
# all_reduce across the trays of a rack-scale NVLink domain (MNNVL, NVLink SHARP in the switch trays): 811 GB/s busbw
# measured on 2 GB200 trays (8 GPUs) of an NVL72, of 900 GB/s raw per GPU (lixueduan.com, "GB200 MNNVL" NCCL test).
MNNVL_ALL_REDUCE_EFFICIENCY = 0.90
ROCE_GOODPUT = 0.92  # RDMA payload rate of a 400G port (ib_write_bw ~ 368 Gb/s)
SMALL_RDMA_MTU_SHARE = 0.85  # IP MTU 1500 → RoCE active MTU 1024: more headers and work requests per byte
LOSSY_ROCE_SHARE = 0.45  # without PFC on the RDMA priority, drops under incast mean go-back-N retransmits
ROCE_RESEND_WINDOW_PACKETS = 1000  # a corrupted packet makes the sender go back N: about a window of packets again
STRAGGLER_SHARE = 0.7  # one slow rank holds every ring step back
THERMAL_SHARE = 0.85
LAUNCH_LATENCY_US = 5.0  # a 1-GPU all_reduce of 8 bytes takes ~5.5 µs on the real H200
NVLINK_HOP_US = 0.7
NETWORK_HOP_US = 4.0
RAMP_BYTES_NVLINK = 2 * 2**20  # bandwidth reaches half its peak at this size (protocol and channel ramp-up)
RAMP_BYTES_NETWORK = 8 * 2**20


def rdma_active_mtu(mtu: int) -> int:
    """The RoCE path MTU the HCA picks for an IP MTU: the largest IB MTU that fits with the RoCE headers."""
    for ib_mtu in (4096, 2048, 1024, 512, 256):
        if mtu >= ib_mtu + 96:
            return ib_mtu
    return 256


def nic_payload_gb_per_s(nic: SimNic, rdma_priority: int, peer_gpus: list[SimGpu]) -> float:
    """GB/s of RDMA payload one NIC moves for NCCL; 0 when its link is down."""
    if not nic.link_up:
        return 0.0
    value = nic.effective_speed_gbps / 8 * ROCE_GOODPUT
    if rdma_active_mtu(nic.mtu) < 4096:
        value *= SMALL_RDMA_MTU_SHARE
    if rdma_priority not in nic.pfc_priorities:
        value *= LOSSY_ROCE_SHARE
    if nic.crc_errors_per_million:  # each frame the cable corrupts costs a go-back-N resend of the window
        value /= 1 + nic.crc_errors_per_million / 1e6 * ROCE_RESEND_WINDOW_PACKETS
    for gpu in peer_gpus:  # GPUDirect RDMA: the GPU's PCIe link feeds the NIC
        value = min(value, pcie_gb_per_s(gpu))
    return value


def node_network_gb_per_s(state: SimulatedNode, rdma_priority: int = 3) -> float:
    """What a node can send to the fabric for NCCL: rings run one per NIC, each as fast as the slowest NIC's."""
    nics = state.data_nics
    if not nics:
        return 0.0
    rates = []
    for nic in nics:
        peers = [gpu for gpu in state.visible_gpus if nic.pcie_switch and gpu.pcie_switch == nic.pcie_switch]
        rates.append(nic_payload_gb_per_s(nic, rdma_priority, peers))
    working = [rate for rate in rates if rate > 0]
    return len(working) * min(working) if working else 0.0


def node_degradation(state: SimulatedNode) -> float:
    share = STRAGGLER_SHARE if state.straggler else 1.0
    if any(gpu.thermal_c for gpu in state.visible_gpus):
        share *= THERMAL_SHARE
    return share


def node_nvlink_busbw_gb_per_s(state: SimulatedNode) -> float:
    gpus = state.visible_gpus
    if len(gpus) < 2:
        return 0.0
    return min(nvlink_gb_per_s(gpu) for gpu in gpus) * NCCL_NVLINK_EFFICIENCY


@dataclass(frozen=True)
class RingModel:
    """A collective's ring over some GPUs: its peak bus bandwidth and its per-step latency."""

    collective: str
    ranks: int
    peak_busbw_gb_per_s: float
    hop_latency_us: float
    ramp_bytes: float

    def time_us(self, size_bytes: int) -> float:
        if self.ranks < 2 or size_bytes == 0:
            return LAUNCH_LATENCY_US
        steps = RING_STEPS[self.collective](self.ranks)
        factor = BUSBW_FACTORS[self.collective](self.ranks)
        bandwidth = self.peak_busbw_gb_per_s * size_bytes / (size_bytes + self.ramp_bytes)
        return LAUNCH_LATENCY_US + steps * self.hop_latency_us + size_bytes * factor / (bandwidth * 1e3)

    def busbw_factor(self) -> float:
        return BUSBW_FACTORS[self.collective](self.ranks) if self.ranks > 1 else 0.0


def one_nvlink_domain(nodes: list[SimulatedNode]) -> bool:
    """Whether the nodes are trays of one rack-scale NVLink domain, in one partition (NCCL's MNNVL then)."""
    domains = {(state.domain.name, state.domain.clique_id) if state.domain else None for state in nodes}
    return len(domains) == 1 and None not in domains


def mnnvl_busbw_gb_per_s(nodes: list[SimulatedNode], collective: str) -> float:
    """Bus bandwidth across trays over NVLink: the GPU with the fewest working links sets it (a switch tray down costs
    every GPU its links there); all_reduce is reduced in the switches (NVLink SHARP)."""
    gpus = [gpu for state in nodes for gpu in state.visible_gpus]
    if not gpus:
        return 0.0
    efficiency = MNNVL_ALL_REDUCE_EFFICIENCY if collective == "all_reduce" else NCCL_NVLINK_EFFICIENCY
    return min(nvlink_gb_per_s(gpu) for gpu in gpus) * efficiency


def ring_model(collective: str, nodes: list[SimulatedNode], gpus_per_node: int) -> RingModel:
    """The ring NCCL builds over `gpus_per_node` GPUs of each node; the slowest link on it sets the pace."""
    ranks = gpus_per_node * len(nodes)
    degradation = min(node_degradation(state) for state in nodes)
    # With one GPU per node no NVLink is on the ring; with one GPU in all, nothing is.
    intra = min(node_nvlink_busbw_gb_per_s(state) for state in nodes) if gpus_per_node > 1 else math.inf
    if len(nodes) == 1:
        peak = 0.0 if intra == math.inf else intra
        return RingModel(collective, ranks, peak * degradation, NVLINK_HOP_US, RAMP_BYTES_NVLINK)
    if one_nvlink_domain(nodes):  # multi-node NVLink: the trays' GPUs reach one another through the switch trays
        return RingModel(
            collective, ranks, mnnvl_busbw_gb_per_s(nodes, collective) * degradation, NVLINK_HOP_US, RAMP_BYTES_NVLINK
        )
    fabric = min(state.leaf_uplink_ratio for state in nodes)
    if len({state.pod for state in nodes}) > 1:  # the ring leaves its pod: through the spines' uplinks to the core
        fabric = min([fabric] + [state.core_uplink_ratio for state in nodes])
    network = min(node_network_gb_per_s(state) for state in nodes) * fabric
    # Several GPUs of a node share its NICs; the ring's bus bandwidth can exceed neither NVLink nor the NICs.
    peak = min(intra, network)
    inter_share = len(nodes) / ranks
    hop = NETWORK_HOP_US * inter_share + NVLINK_HOP_US * (1 - inter_share)
    return RingModel(collective, ranks, peak * degradation, hop, RAMP_BYTES_NETWORK)
