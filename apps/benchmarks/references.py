"""Reference figures shipped with Rackpilot (docs/benchmarks.md says where each comes from), and the lookup of the
reference a test is judged against: the node's GPU SKU, inside a node (NVLink) or across nodes (its data NICs)."""

import math
from collections import Counter
from dataclasses import dataclass

from apps.benchmarks.choices import GIB, Collective, Scope, Suite, judge_against
from apps.core.renames import as_model_fields
from apps.inventory.choices import NicPurpose

NVLINK = "nvlink"
MNNVL = "mnnvl"  # across the trays of one rack-scale NVLink domain: multi-node NVLink through its switch trays

# (SKU, fabric, scope, expected, warn, fail) for all_reduce busbw in GB/s at sizes of 1 GiB and up.
SHIPPED = [
    ("H100 SXM", NVLINK, Scope.INTRA, 450.0, 360.0, 300.0),
    ("H200 SXM", NVLINK, Scope.INTRA, 450.0, 360.0, 300.0),
    ("A100 SXM 80GB", NVLINK, Scope.INTRA, 230.0, 205.0, 180.0),
    ("H100 SXM", "roce-8x400g", Scope.INTER, 360.0, 330.0, 290.0),
    ("H200 SXM", "roce-8x400g", Scope.INTER, 360.0, 330.0, 290.0),
    ("H100 SXM", "ib-8x400g", Scope.INTER, 360.0, 330.0, 290.0),
    ("H200 SXM", "ib-8x400g", Scope.INTER, 360.0, 330.0, 290.0),
    ("A100 SXM 80GB", "roce-16x100g", Scope.INTER, 190.0, 170.0, 150.0),
    ("A100 SXM 80GB", "ib-8x200g", Scope.INTER, 190.0, 170.0, 150.0),
    ("GB200", MNNVL, Scope.INTER, 811.0, 746.0, 654.0),
]
SOURCES = {
    Scope.INTRA: "docs/benchmarks.md#references (intra-node all_reduce, 8 GPUs, NVLink)",
    Scope.INTER: "docs/benchmarks.md#references (inter-node all_reduce, one rail per GPU)",
}
MNNVL_SOURCE = (
    "811 GB/s all_reduce busbw over MNNVL measured on 2 trays (8 GPUs) of a GB200 NVL72 "
    "(lixueduan.com/posts/ai/13-gb200-mnnvl-nccl-test); warn and fail at the inter-node rows' shares of expected "
    "(92 %, 81 %); docs/benchmarks.md#references"
)


def shipped_rows() -> list[dict]:
    """The shipped references as field values."""
    return [
        {
            "sku_name": name,
            "fabric": fabric,
            "scope": scope,
            "collective": Collective.ALL_REDUCE,
            "min_size_bytes": GIB,
            "expected_gb_per_s": expected,
            "warn_gb_per_s": warn,
            "fail_gb_per_s": fail,
            "source": MNNVL_SOURCE if fabric == MNNVL else SOURCES[scope],
        }
        for name, fabric, scope, expected, warn, fail in SHIPPED
    ]


def fabric_of(node) -> str:
    """'roce-8x400g': the transport, count and speed of a node's data NICs ('' when it has none)."""
    nics = [nic for nic in node.nics.all() if nic.purpose == NicPurpose.DATA]
    if not nics:
        return ""
    (transport, speed), _ = Counter((nic.transport, nic.speed_gbps) for nic in nics).most_common(1)[0]
    return f"{transport}-{len(nics)}x{speed}g"


def fabric_across(nodes) -> str:
    """What a test across these nodes runs over: MNNVL when they are two or more trays of one NVLink domain (NCCL
    goes over NVLink; the shipped GB200 reference is that row), else the first node's data NICs."""
    domains = {node.nvlink_domain_id for node in nodes}
    if len(nodes) > 1 and len(domains) == 1 and None not in domains:
        return MNNVL
    return fabric_of(nodes[0])


def sync_shipped(reference_model) -> int:
    """Create the shipped references that are missing (edited rows are left as they are); returns how many."""
    created = 0
    for row in shipped_rows():
        keys = {name: row.pop(name) for name in ("sku_name", "fabric", "scope", "collective")}
        # A migration's model may still name the tiers as they were (expected_gbps, ...).
        created += reference_model.objects.get_or_create(**keys, defaults=as_model_fields(reference_model, row))[1]
    return created


# --- the per-node suites (MeasurementReference rows) -------------------------------------------------------------

H100_MXP = (
    "two real 8 x H100 SXM runs of NVIDIA's HPL-MxP: 2,537 TFLOPS LU per node = 317 TFLOPS per GPU (AI @ Georgia Tech "
    "on Voltage Park, github.com/aigatech/vpbenchmarking) and 311,749 GFLOPS LU per GPU at N = 258048 "
    "(scc25-benchmarking.readthedocs.io, mxphpl); warn below 90 %, fail below 80 %"
)
PCIE5_COPY = (
    "pinned copies over PCIe Gen5 x16: 55.1–55.3 GB/s per GPU in the real H800 capture "
    "(tests/fixtures/real/nvbandwidth/h800-8gpu-v0.2-all-tests.txt), 54.6 / 55.0 on the real H200"
)
PCIE4_COPY = "derived, not measured: PCIe Gen4 x16 at the 87.5 % efficiency measured on Gen5 (27.6 GB/s)"
NVLINK18_COPY = (
    "derived: the real H800 capture moves 172 GB/s per GPU pair over 8 NVLinks (81 % of 8 x 26.56 GB/s); 18 links "
    "at that share give 387 GB/s; warn below 375 because one link of 18 down costs 5.6 %. Not yet measured by us on an "
    "8-GPU H100/H200 node"
)
NVLINK12_COPY = (
    "derived, not measured: 12 NVLinks x 25 GB/s at the 81 % share measured on the H800 (243 GB/s); warn below 230 "
    "(one link of 12 down costs 8 %)"
)
SOAK_HOPPER = (
    "the real H200 capture under a GEMM loop: ~1450 MHz at its 700 W cap with the SW power cap reason set "
    "(tests/fixtures/real/h200-1gpu/nvidia-smi-dmon-s-pucvmet-load.txt); H100 SXM has the same 700 W limit"
)
SOAK_AMPERE = "NVIDIA's HPL Rpeak clock for A100 at its 400 W limit, 1305 MHz (glennklockwood.com/garden/peak-FLOPS)"
HOPPER_HPL = (
    "derived, not measured by us: NVIDIA's H100 SXM datasheet gives 67 TFLOPS FP64 tensor core at 1980 MHz (132 SMs x "
    "256 FLOP/clock); at the 1455 MHz a GEMM loop holds at 700 W (measured on the real H200, same die and limit) that "
    "is 49.2 TFLOPS, and NVIDIA's HPL reaches ~85 % of it on one node: 42 TFLOPS per GPU; warn below 90 %, fail "
    "below 80 %. Replace with an accepted baseline"
)
AMPERE_HPL = (
    "derived, not measured: A100's 19.5 TFLOPS FP64 tensor core (108 SMs x 128 x 1410 MHz) at the 1305 MHz HPL "
    "holds at 400 W is 18.0 TFLOPS; ~85 % of it: 15.3 TFLOPS per GPU"
)
HOPPER, AMPERE = ("H100 SXM", "H200 SXM"), ("A100 SXM 80GB",)
D2D_CASES = (
    "device_to_device_memcpy_read_ce",
    "device_to_device_memcpy_write_ce",
    "device_to_device_bidirectional_memcpy_read_ce",
)
HOST_CASES = ("host_to_device_memcpy_ce", "device_to_host_memcpy_ce")

# (SKUs, suite, case, unit, expected, warn below, fail below, source)
MEASUREMENTS_SHIPPED = [
    (HOPPER, "hpl-mxp", "lu_gflops_per_gpu", "GFLOPS", 310_000.0, 280_000.0, 250_000.0, H100_MXP),
    (
        AMPERE,
        "hpl-mxp",
        "lu_gflops_per_gpu",
        "GFLOPS",
        100_000.0,
        90_000.0,
        80_000.0,
        "derived, not measured: the H100 runs' share of dense FP16 peak (317 of 989 TFLOPS) times A100's 312",
    ),
    (HOPPER, "hpl", "hpl_gflops_per_gpu", "GFLOPS", 42_000.0, 37_800.0, 33_600.0, HOPPER_HPL),
    (AMPERE, "hpl", "hpl_gflops_per_gpu", "GFLOPS", 15_300.0, 13_800.0, 12_200.0, AMPERE_HPL),
    *[(HOPPER, "nvbandwidth", case, "GB/s", 55.0, 50.0, 40.0, PCIE5_COPY) for case in HOST_CASES],
    *[(AMPERE, "nvbandwidth", case, "GB/s", 26.0, 23.0, 18.0, PCIE4_COPY) for case in HOST_CASES],
    *[(HOPPER, "nvbandwidth", case, "GB/s", 385.0, 375.0, 300.0, NVLINK18_COPY) for case in D2D_CASES],
    *[(AMPERE, "nvbandwidth", case, "GB/s", 240.0, 230.0, 180.0, NVLINK12_COPY) for case in D2D_CASES],
    (
        ("H200 SXM",),
        "nvbandwidth",
        "device_local_copy",
        "GB/s",
        4200.0,
        4000.0,
        3600.0,
        "the real H200: device copy 4.21 TB/s (bytes read + written), 88 % of the 4.8 TB/s datasheet "
        "(tests/fixtures/real/h200-1gpu/node-benchmarks-torch.json)",
    ),
    (
        ("H100 SXM",),
        "nvbandwidth",
        "device_local_copy",
        "GB/s",
        2900.0,
        2750.0,
        2500.0,
        "a real 8 x H100 SXM node: D2D (HBM3) 2,903 GB/s, 86.7 % of 3.35 TB/s (github.com/aigatech/vpbenchmarking)",
    ),
    (
        AMPERE,
        "nvbandwidth",
        "device_local_copy",
        "GB/s",
        1790.0,
        1700.0,
        1500.0,
        "derived, not measured: 2.039 TB/s datasheet at the 88 % measured on the H200",
    ),
    (HOPPER, "burn-in", "sustained_sm_clock_mhz", "MHz", 1455.0, 1300.0, 1100.0, SOAK_HOPPER),
    (AMPERE, "burn-in", "sustained_sm_clock_mhz", "MHz", 1305.0, 1200.0, 1000.0, SOAK_AMPERE),
]


def shipped_measurement_rows() -> list[dict]:
    return [
        {
            "sku_name": sku,
            "suite": suite,
            "case": case,
            "unit": unit,
            "expected": expected,
            "warn_below": warn,
            "fail_below": fail,
            "source": source,
        }
        for skus, suite, case, unit, expected, warn, fail, source in MEASUREMENTS_SHIPPED
        for sku in skus
    ]


def sync_shipped_measurements(reference_model) -> int:
    """Create the shipped measurement references that are missing (edited rows stay); returns how many."""
    created = 0
    for row in shipped_measurement_rows():
        keys = {name: row.pop(name) for name in ("sku_name", "suite", "case")}
        created += reference_model.objects.get_or_create(**keys, defaults=row)[1]
    return created


# --- HPL across nodes -------------------------------------------------------------------------------------------------

# A per-node reference is one node's solve, its panels broadcast over NVLink. Across nodes each of the LU's ceil(n / nb)
# panel steps also sends an n x nb panel over the nodes' data NICs, which no per-node figure paid: held to the per-node
# tiers, a healthy rack's HPL-MxP reads ~87 % and always warns. The set's tiers are the per-node ones times the share
# of the solve that is still compute once that broadcast is added: the model the simulator's HPL-MxP follows (compute
# at the per-GPU rate, plus a broadcast per panel at the slowest node's network rate).
HPL_PANEL_BYTES = {Suite.HPL_MXP: 2, Suite.HPL: 8}  # an element of the panel: FP16 (MxP's LU) or FP64
RDMA_PAYLOAD_SHARE = 0.92  # of a port's line rate, what RDMA moves: ib_write_bw ~368 Gb/s on a 400G port


@dataclass(frozen=True)
class Tiers:
    """The three tiers a figure is judged against, and how they were had (blank: the reference's own)."""

    expected: float
    warn_below: float
    fail_below: float
    note: str = ""

    def judge(self, value: float | None) -> str:
        return judge_against(value, warn_below=self.warn_below, fail_below=self.fail_below)


def network_gbytes_per_s(nodes) -> float:
    """What the slowest of these nodes sends to the fabric, GB/s: its data NICs that are up, each as fast as the
    slowest of them, at RDMA's payload share (0 where a node has none: not known)."""
    rates = []
    for node in nodes:
        speeds = [nic.speed_gbps for nic in node.nics.all() if nic.purpose == NicPurpose.DATA and nic.link_up]
        rates.append(len(speeds) * min(speeds) / 8 * RDMA_PAYLOAD_SHARE if speeds else 0.0)
    return min(rates) if rates else 0.0


def hpl_tiers(reference, *, suite: str, nodes: list, n: int | None, nb: int | None, gpus: int) -> Tiers:
    """The reference's tiers for an HPL solve of order n (block nb) over `gpus` GPUs of `nodes`: its own on one node;
    across nodes, scaled by the compute share of the solve once each panel's broadcast over the network is added."""
    own = Tiers(reference.expected, reference.warn_below, reference.fail_below)
    if len(nodes) < 2:
        return own
    network = network_gbytes_per_s(nodes)
    if not (n and nb and gpus and network):
        return Tiers(
            own.expected,
            own.warn_below,
            own.fail_below,
            note="the per-node tiers: no order, block or data NIC known to scale them across nodes",
        )
    compute_s = 2 / 3 * n**3 / (reference.expected * 1e9 * gpus)
    broadcast_s = math.ceil(n / nb) * n * nb * HPL_PANEL_BYTES[suite] / (network * 1e9)
    share = compute_s / (compute_s + broadcast_s)
    return Tiers(
        reference.expected * share,
        reference.warn_below * share,
        reference.fail_below * share,
        note=(
            f"{len(nodes)} nodes: the per-node tiers x {share:.3f}, the compute share of the solve once each of its "
            f"{math.ceil(n / nb)} panels (N = {n}, NB = {nb}) is broadcast at {network:.0f} GB/s"
        ),
    )
