"""The SKU catalogue's power model: every shipped SKU has one, it reproduces the measured H200, and a lower limit
keeps less clock (tests/simulator/test_model.py: the simulator draws by the same figures)."""

import pytest

from apps.inventory.catalogue import GPU_SKUS
from apps.inventory.gpu_power import GPU_POWER_MODELS, H200_MEASURED, gpu_power_model


def test_every_shipped_sku_has_a_power_model_and_an_unknown_one_gets_the_measured_cards():
    assert {sku["name"] for sku in GPU_SKUS} == set(GPU_POWER_MODELS)
    assert gpu_power_model("Someone's own SKU") is H200_MEASURED
    assert gpu_power_model(None) is H200_MEASURED


def test_the_model_reproduces_the_real_h200():
    h200 = gpu_power_model("H200 SXM")
    assert h200.demand_w(1.0, 1455.0) == pytest.approx(690.0)  # a GEMM loop near 1455 MHz on the real card
    assert h200.clock_at_limit_mhz(1.0, 690.0) == pytest.approx(1455.0)
    assert h200.idle_w == 78.0


def test_a_lower_limit_keeps_less_clock_and_an_idle_board_saves_nothing():
    h200 = gpu_power_model("H200 SXM")
    curve = h200.curve(tdp_w=700, limits_w=[700, 600, 450, 300, 200])
    shares = [share for _, share in curve]
    assert shares[0] == 1.0 and shares == sorted(shares, reverse=True)
    assert shares[2] == pytest.approx(((450 - 110) / (700 - 110)) ** (1 / 2.5), abs=1e-4)
    assert h200.limited_draw(mean_w=100.0, busy_w=700.0, limit_w=450.0) == (100.0, 1.0, False)  # below static
    draw, clock, saturated = h200.limited_draw(mean_w=300.0, busy_w=700.0, limit_w=450.0)
    assert draw < 300.0 and clock == pytest.approx(shares[2], abs=1e-4) and not saturated
    assert h200.limited_draw(mean_w=690.0, busy_w=700.0, limit_w=450.0) == (450.0, pytest.approx(clock), True)
