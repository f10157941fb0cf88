"""A BMC's GPU names count from 1, the portal's GPU indexes (nvidia-smi's) from 0: one mapping says which is which."""

import pytest

from apps.monitoring.bmc.gpu_names import gpu_index, with_gpu_index


@pytest.mark.parametrize(
    ("name", "index", "shown"),
    [
        ("GPU4 HBM", 3, "GPU4 (SEL, = GPU 3) HBM"),
        ("Memory GPU1 HBM: Uncorrectable ECC", 0, "Memory GPU1 (SEL, = GPU 0) HBM: Uncorrectable ECC"),
        ("Inlet Temp", None, "Inlet Temp"),
        ("GPU0 Temp", None, "GPU0 Temp"),  # no GPU0 on a BMC that counts from 1: left as it is
        ("GPUS Temp", None, "GPUS Temp"),
    ],
)
def test_a_bmc_gpu_name_says_its_index(name, index, shown):
    assert gpu_index(name) == index
    assert with_gpu_index(name, source="SEL") == shown
