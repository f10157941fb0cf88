"""The GPU SKU catalogue shipped with Rackpilot.

Datasheet figures are NVIDIA's. The achievable memory bandwidth is what a healthy card measures in a
device-to-device copy: 4.21 TB/s was measured on a real H200 (88% of its 4.8 TB/s datasheet); the other SKUs use
the same 88% share until measured. Acceptance thresholds are a percentage of this reference, never of the datasheet.
"""

from decimal import Decimal

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
        "mem_bandwidth_tbps": bandwidth,
        "mem_bandwidth_reference_tbps": reference,
        "nvlink_gbps": nvlink,
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
]


def sync_gpu_skus(gpu_sku_model) -> int:
    """Create or refresh the shipped SKUs; SKUs an operator added are left alone. Returns how many were created."""
    created = 0
    known = {field.name for field in gpu_sku_model._meta.get_fields()}  # a migration's model may predate a field
    for values in GPU_SKUS:
        values = {name: value for name, value in values.items() if name in known}
        _, was_created = gpu_sku_model.objects.update_or_create(name=values["name"], defaults=values)
        created += was_created
    return created
