"""The GPU SKU catalogue shipped with Rackpilot.

Datasheet figures are NVIDIA's. The achievable memory bandwidth is what a healthy card measures in a
device-to-device copy: 4.21 TB/s was measured on a real H200 (88% of its 4.8 TB/s datasheet); the other SKUs use
the same 88% share until measured. Acceptance thresholds are a percentage of this reference, never of the datasheet.

Every GPU SKU fact lives here: the datasheet rows (GPU_SKUS, copied into GpuSku by sync_gpu_skus), what a card
reports about itself (GPU_DEVICES) and what sets its arithmetic rate (GPU_COMPUTE); the simulator answers with them.
"""

from dataclasses import dataclass
from decimal import Decimal

from apps.core.renames import as_model_fields

ACHIEVABLE_SHARE = Decimal("0.88")


def _sku(
    name,
    architecture,
    hbm_gib,
    bandwidth,
    nvlink,
    tdp,
    bf16,
    fp8,
    *,
    form_factor="SXM",
    pcie_gen=5,
    measured=None,
    min_power=200,
):
    bandwidth = Decimal(bandwidth)
    reference = Decimal(measured) if measured else (bandwidth * ACHIEVABLE_SHARE).quantize(Decimal("0.01"))
    return {
        "name": name,
        "vendor": "NVIDIA",
        "architecture": architecture,
        "form_factor": form_factor,
        "hbm_gib": hbm_gib,
        "mem_bandwidth_tb_per_s": bandwidth,
        "mem_bandwidth_reference_tb_per_s": reference,
        "nvlink_gb_per_s": nvlink,
        "tdp_w": tdp,
        "min_power_limit_w": min_power,
        "bf16_dense_tflops": Decimal(bf16),
        "fp8_dense_tflops": Decimal(fp8) if fp8 is not None else None,
        "pcie_gen": pcie_gen,
    }


GPU_SKUS = [
    _sku("H200 SXM", "Hopper", 141, "4.80", 900, 700, "989.5", "1979", measured="4.21"),
    _sku("H100 SXM", "Hopper", 80, "3.35", 900, 700, "989.5", "1979"),
    _sku("H20", "Hopper", 96, "4.00", 900, 400, "148", "296"),
    _sku("A100 SXM 80GB", "Ampere", 80, "2.04", 600, 400, "312", None, pcie_gen=4, min_power=100),
    _sku("L40S", "Ada Lovelace", 48, "0.86", 0, 350, "362", "733", form_factor="PCIe", pcie_gen=4, min_power=100),
    # Blackwell: the HGX B200 board at 1,000 W; the GB200 superchip's GPUs at 1,200 W (13.4 TB of HBM3e and
    # 576 TB/s over an NVL72 rack's 72 GPUs; NVIDIA's dense figures are half its sparse ones).
    _sku("B200 SXM", "Blackwell", 180, "8.00", 1800, 1000, "2250", "4500", pcie_gen=6),
    _sku("GB200", "Blackwell", 186, "8.00", 1800, 1200, "2500", "5000", form_factor="Superchip", pcie_gen=6),
]


def sync_gpu_skus(gpu_sku_model) -> int:
    """Create or refresh the shipped SKUs; SKUs an operator added are left alone. Returns how many were created."""
    created = 0
    for values in GPU_SKUS:
        values = as_model_fields(gpu_sku_model, values)  # a migration's model may predate a field or its new name
        _, was_created = gpu_sku_model.objects.update_or_create(name=values["name"], defaults=values)
        created += was_created
    return created


# --- what a card of a SKU reports about itself, and what sets its arithmetic rate -------------------------------------


@dataclass(frozen=True)
class GpuDevice:
    """What NVML reports for a card of the SKU beyond the datasheet figures above (GPU_SKUS): its name, usable
    memory, PCI ids, clocks, NVLink links and part numbers, as captured on real cards. The simulator answers with
    them; a SKU without an entry is answered in the H200's shape (apps.simulator.state.facts_for)."""

    product_name: str
    memory_mib: int
    reserved_mib: int
    device_id: str
    subsystem_id: str
    max_sm_mhz: int
    idle_sm_mhz: int
    memory_mhz: int
    video_max_mhz: int
    nvlinks: int
    nvlink_link_gb_per_s: float  # per link, one direction, as `nvidia-smi nvlink -s` prints it
    board_part: str
    gpu_part: str
    inforom: str
    # NUMA nodes the card's own memory shows as (a Grace-attached GPU's HBM is system memory over NVLink-C2C: eight
    # nodes a GPU on GB200, the first its "GPU NUMA ID"); 0 on a PCIe/SXM card behind an x86 host.
    memory_numa_nodes: int = 0


GPU_DEVICES = {
    "H200 SXM": GpuDevice(
        "NVIDIA H200",
        143771,
        616,
        "233510DE",
        "18BF10DE",
        1980,
        345,
        3201,
        1545,
        18,
        26.562,
        "692-2G520-0282-000",
        "2335-895-A1",
        "G520.0282.02.02",
    ),
    "H100 SXM": GpuDevice(
        "NVIDIA H100 80GB HBM3",
        81559,
        527,
        "233010DE",
        "16C110DE",
        1980,
        345,
        2619,
        1545,
        18,
        26.562,
        "692-2G520-0200-000",
        "2330-885-A1",
        "G520.0200.00.05",
    ),
    # GB200 (the Blackwell GPU of a GB200 superchip). Public captures give: the name "NVIDIA GB200" and 189,471 MiB
    # (sgl-project/sglang#11208, a 4x GB200 tray's `nvidia-smi topo -m`: NV18 between every pair, GPU NUMA IDs 2,
    # 10, 18, 26 and NUMA affinity 0,3-9,11-17 / 1,19-25,27-33, so eight memory NUMA nodes a GPU); 18 NVLink 5 links
    # at 1.8 TB/s together (NVIDIA's GB200 NVL72 datasheet), so 50 GB/s a link each way; device id 0x2941 (the PCI
    # ID repository). Reserved memory, clocks, board and GPU part numbers and the InfoROM are the H200's until a
    # GB200 is measured.
    "GB200": GpuDevice(
        "NVIDIA GB200",
        189471,
        616,
        "294110DE",
        "18BF10DE",
        1980,
        345,
        3201,
        1545,
        18,
        50.0,
        "692-2G520-0282-000",
        "2335-895-A1",
        "G520.0282.02.02",
        memory_numa_nodes=8,
    ),
}


@dataclass(frozen=True)
class GpuCompute:
    """What sets a SKU's arithmetic rate: SMs, dense FLOP per clock per SM, and the SM clock a GEMM loop sustains
    at the board's TDP."""

    sms: int
    fp16_flops_per_clock_sm: int  # dense tensor-core FP16: 989 TFLOPS = 132 SMs x 4096 x 1830 MHz on Hopper
    fp32_flops_per_clock_sm: int  # vector FMA: 66.9 TFLOPS = 132 x 256 x 1980 MHz on Hopper
    max_sm_mhz: int
    loaded_sm_mhz: int  # at the TDP under a GEMM loop: 1455 MHz measured on the real H200 (700 W)
    fp64_flops_per_clock_sm: int = 0  # tensor-core DGEMM: 67 TFLOPS = 132 x 256 x 1980 MHz on H100 SXM (datasheet)


HOPPER_COMPUTE = GpuCompute(132, 4096, 256, 1980, 1455, fp64_flops_per_clock_sm=256)
# A100: 312 TFLOPS FP16 = 108 x 2048 x 1410 MHz, 19.5 TFLOPS FP64 tensor = 108 x 128 x 1410 MHz; NVIDIA quotes
# 1305 MHz as the clock HPL sustains at 400 W.
AMPERE_COMPUTE = GpuCompute(108, 2048, 128, 1410, 1305, fp64_flops_per_clock_sm=128)
GPU_COMPUTE = {
    "H100 SXM": HOPPER_COMPUTE,
    "H200 SXM": HOPPER_COMPUTE,
    "A100 SXM 80GB": AMPERE_COMPUTE,
    "A100 SXM 40GB": AMPERE_COMPUTE,
    # No public source gives a GB200's SM count, sustained clock and per-SM rates together: the H200's until measured
    # (so the simulator's GB200 computes like an H200; its datasheet row above keeps NVIDIA's dense figures).
    "GB200": HOPPER_COMPUTE,
}


def compute_of(*, sku_name: str, architecture: str) -> GpuCompute:
    """The SKU's compute facts; a SKU without an entry computes like its architecture (Hopper when unknown)."""
    return GPU_COMPUTE.get(sku_name, AMPERE_COMPUTE if architecture == "Ampere" else HOPPER_COMPUTE)


# --- rack-scale systems: an NVLink domain that spans a rack ---------------------------------------------------------


@dataclass(frozen=True)
class RackSystem:
    """A rack-scale system as NVIDIA builds it: compute trays (each a host with its GPUs and Grace CPUs), NVLink
    switch trays every GPU links to, power shelves and a liquid-cooling loop. NVL36 and the next generation are
    rows of the same shape."""

    name: str
    gpu_sku: str
    compute_trays: int
    gpus_per_tray: int
    cpus_per_tray: int
    switch_trays: int
    nvswitches_per_tray: int
    links_per_gpu: int  # each GPU's NVLink links, spread evenly over the switch trays
    power_shelves: int
    tray_u: int = 1

    @property
    def gpus(self) -> int:
        return self.compute_trays * self.gpus_per_tray

    @property
    def links_per_switch_tray(self) -> int:
        """How many of each GPU's links land on one switch tray (two on NVL72: 18 links over 9 trays)."""
        return self.links_per_gpu // self.switch_trays


RACK_SYSTEMS = {
    # 18 compute trays of 2 GB200 superchips (2 Grace + 4 Blackwell), 9 NVLink switch trays of 2 NVSwitch chips,
    # 18 NVLink 5 links per GPU (1.8 TB/s), 8 power shelves: NVIDIA's GB200 NVL72 reference rack.
    "GB200 NVL72": RackSystem("GB200 NVL72", "GB200", 18, 4, 2, 9, 2, 18, 8),
}
