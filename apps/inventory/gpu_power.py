"""The GPU SKU catalogue's power model: what a board draws idle and busy, and what a power limit leaves of its clock.

Kept beside the SKUs' other facts (catalogue.py) and keyed by the same SKU name, so the power figures have one home:
the simulator draws its GPUs' power and clocks from them, and the cost policies plan with them (the saving of a lower
limit, the throughput it keeps, the idle draw freed by scaling in). Nothing here imports the simulator.

The model, calibrated on the real H200 capture (tests/fixtures/real/h200-1gpu): a busy board draws a static share S
that does not follow the SM clock (HBM, fabric, fans) plus a dynamic share that grows as the clock to the power
`dynamic_exponent` (f·V², and the voltage rises with f): P(f) = S + load · D_ref · (f / f_ref)^e, where D_ref is a
GEMM loop's dynamic draw at the reference clock f_ref (690 W at ~1455 MHz on the real card). Under a power limit L the
governor lowers the clock until P(f) = L, so a card whose busy draw would be F runs at
r = ((L − S) / (F − S))^(1/e) of its clock: the throughput share it keeps under full load.

Only the H200 has been measured; the other shipped SKUs use its figures until they are (as catalogue.py does for the
achievable bandwidth), and so does a SKU an operator adds.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuPowerModel:
    """One SKU's board power: idle draw, the static share of a busy board, and how the dynamic share follows the
    SM clock."""

    idle_w: float  # an idle board at its idle clock (the H200: ~78 W at 345 MHz)
    static_w: float  # a busy board's draw that does not scale with the SM clock
    dynamic_at_reference_w: float  # the SM power of a GEMM loop at `reference_clock_mhz`
    reference_clock_mhz: float
    dynamic_exponent: float  # dynamic power ~ f^e

    def demand_w(self, load: float, sm_mhz: float) -> float:
        """What a load between 0 and 1 draws at an SM clock, with no limit in the way."""
        return self.static_w + load * self.dynamic_at_reference_w * (sm_mhz / self.reference_clock_mhz) ** (
            self.dynamic_exponent
        )

    def clock_at_limit_mhz(self, load: float, limit_w: float) -> float:
        """The SM clock at which a load draws exactly the limit (the power-capping governor's target)."""
        dynamic = max(limit_w - self.static_w, 1.0)
        return self.reference_clock_mhz * (dynamic / (load * self.dynamic_at_reference_w)) ** (
            1 / self.dynamic_exponent
        )

    def clock_share(self, *, limit_w: float, busy_w: float) -> float:
        """r: the share of its clock (so of its throughput) a board that would draw `busy_w` while busy keeps under
        `limit_w`; 1 when the limit is not in the way."""
        if busy_w <= limit_w:
            return 1.0
        share = max(limit_w - self.static_w, 1.0) / max(busy_w - self.static_w, 1.0)
        return min(1.0, share ** (1 / self.dynamic_exponent))

    def busy_draw_w(self, *, mean_w: float, busy_share: float) -> float:
        """F: what a board drew while busy, from its mean draw over a time it was busy `busy_share` (0..1) of."""
        return self.static_w + (mean_w - self.static_w) / busy_share

    def limited_draw(self, *, mean_w: float, busy_w: float, limit_w: float) -> tuple[float, float, bool]:
        """(mean draw under the limit, clock share r, whether the work no longer fits) for a board drawing `mean_w`
        on average and `busy_w` (F) while busy. The same work keeps the slower board busy u/r of the time, so its mean
        draw becomes S + (P − S)·((L − S)/(F − S))^(1 − 1/e); an idle board (below S) saves nothing."""
        static, exponent = self.static_w, self.dynamic_exponent
        if mean_w <= static or busy_w <= limit_w or busy_w <= static:
            return mean_w, 1.0, False
        ratio = max(limit_w - static, 1.0) / (busy_w - static)
        clock = ratio ** (1 / exponent)
        busy = (mean_w - static) / (busy_w - static)
        if busy / clock > 1:  # more work than the slower board can do: it runs flat out at the limit
            return float(limit_w), clock, True
        return static + (mean_w - static) * ratio ** (1 - 1 / exponent), clock, False

    def curve(self, *, tdp_w: float, limits_w: list[float]) -> list[tuple[float, float]]:
        """(limit, throughput share kept under full load) for each limit, for a board whose busy draw is its TDP."""
        return [(float(limit), round(self.clock_share(limit_w=limit, busy_w=tdp_w), 4)) for limit in limits_w]


# The real H200: idle 78 W; a GEMM loop at 690 W around 1455 MHz, of which ~110 W does not follow the clock.
H200_MEASURED = GpuPowerModel(
    idle_w=78.0, static_w=110.0, dynamic_at_reference_w=580.0, reference_clock_mhz=1455.0, dynamic_exponent=2.5
)

GPU_POWER_MODELS: dict[str, GpuPowerModel] = {
    "H200 SXM": H200_MEASURED,
    "H100 SXM": H200_MEASURED,  # not measured yet: the H200's figures
    "H20": H200_MEASURED,
    "A100 SXM 80GB": H200_MEASURED,
    "L40S": H200_MEASURED,
    "B200 SXM": H200_MEASURED,
    "GB200": H200_MEASURED,
}

# A SKU with no entry (one an operator added) is planned with the measured card's figures.
DEFAULT_GPU_POWER_MODEL = H200_MEASURED


def gpu_power_model(sku_name: str | None) -> GpuPowerModel:
    """The power model of a SKU by name; the measured card's for a SKU the catalogue does not list."""
    return GPU_POWER_MODELS.get(sku_name or "", DEFAULT_GPU_POWER_MODEL)
