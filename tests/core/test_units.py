"""Units as every page writes them (apps/core/units.py)."""

import pytest

from apps.core.units import link_rate, percent, size


@pytest.mark.parametrize(
    ("gbps", "text"), [(200, "200 Gb/s"), (1600, "1.6 Tb/s"), (103650, "103650 Gb/s"), (12.5, "12.5 Gb/s")]
)
def test_a_link_rate_is_in_bits_per_second(gbps, text):
    assert link_rate(gbps) == text


@pytest.mark.parametrize(
    ("share", "text"),
    [
        (0.5, "50 %"),
        (1, "100 %"),
        (0, "0 %"),
        (327 / 328, "99.7 %"),  # one failed GPU of 328 is not "100 %"
        (1 / 328, "0.3 %"),  # nor one healthy "0 %"
        (0.9996, "99.96 %"),
        (1 - 1e-7, "> 99.999 %"),
    ],
)
def test_a_share_never_rounds_to_all_or_nothing_when_it_is_not(share, text):
    assert percent(share) == text


@pytest.mark.parametrize(("count", "text"), [(4294967296, "4 GiB"), (1536, "1.5 KiB"), (8, "8 B"), (2**20, "1 MiB")])
def test_a_size_is_in_binary_units_as_nccl_tests_sizes_are(count, text):
    assert size(count) == text
