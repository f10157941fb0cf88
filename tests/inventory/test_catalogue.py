"""GPU SKU facts have one home, the catalogue: the datasheet rows, what a card reports about itself, its compute."""

from apps.inventory.catalogue import AMPERE_COMPUTE, GPU_COMPUTE, GPU_DEVICES, GPU_SKUS, HOPPER_COMPUTE, compute_of

SKUS = {sku["name"]: sku for sku in GPU_SKUS}


def test_every_device_is_a_shipped_sku_whose_memory_and_clock_agree_with_its_other_facts():
    for name, device in GPU_DEVICES.items():
        assert name in SKUS, name
        assert device.memory_mib <= SKUS[name]["hbm_gib"] * 1024, name  # usable memory within the datasheet's
        assert device.max_sm_mhz == GPU_COMPUTE[name].max_sm_mhz, name  # one boost clock, not two


def test_a_sku_without_compute_facts_computes_like_its_architecture():
    assert compute_of(sku_name="H200 SXM", architecture="Hopper") is HOPPER_COMPUTE
    assert compute_of(sku_name="A100 SXM 80GB", architecture="Ampere") is AMPERE_COMPUTE
    assert compute_of(sku_name="A100 PCIe 80GB", architecture="Ampere") is AMPERE_COMPUTE
    assert compute_of(sku_name="Next", architecture="") is HOPPER_COMPUTE
