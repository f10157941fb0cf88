"""The figures the per-node suites read, from the real captures in tests/fixtures/real (the simulator's output goes
through the same functions in test_node_suites.py)."""

from pathlib import Path

from apps.benchmarks import suites
from apps.benchmarks.choices import Verdict
from apps.nodeexec.catalogue import SOAK_SAMPLES_MARK

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"


def real(path: str) -> str:
    return (REAL / path).read_text()


def test_hpl_mxp_figures_of_the_real_a100_run_and_of_the_cancelled_one():
    lu, reported = suites.hpl_mxp_figures(real("hpl-mxp/hpl-mxp-nvidia-25.9.0-a100-40gb-1gpu-n10000-passed-ansi.txt"))
    assert (lu.case, lu.value, reported.value) == ("lu_gflops_per_gpu", 2083.10, 1365.08)
    assert lu.series["n"] == 10000 and lu.series["residual_check"] == "PASSED" and lu.floor == Verdict.PASS

    stem = "hpl-mxp/hpl-mxp-nvidia-25.9.0-a100-4gpu-2x2-hung-cancelled"
    lu, _ = suites.hpl_mxp_figures(real(f"{stem}.stdout.txt") + real(f"{stem}.stderr.txt"))
    assert lu.value is None and lu.floor == Verdict.FAIL
    assert any("CANCELLED" in note for note in lu.notes)


def test_nvbandwidth_figures_of_the_real_h800_take_each_cases_slowest_cell():
    found = {
        figure.case: figure for figure in suites.nvbandwidth_figures(real("nvbandwidth/h800-8gpu-v0.2-all-tests.txt"))
    }
    h2d = found["host_to_device_memcpy_ce"]
    assert h2d.value == 55.28 and h2d.unit == "GB/s" and "row 0, column 0" in h2d.notes[1]
    d2d = found["device_to_device_memcpy_read_ce"]
    assert len(d2d.series["matrix"]) == 8 and d2d.value < 180 and d2d.series["sum"] == 9643.22


def test_soak_figures_of_a_real_gpu_burn_run_with_faulty_gpus():
    text = real("gpu-burn/gpu_burn-16gpu-faulty-warning-issue12-partial.txt")
    clock, gflops = suites.soak_figures(text, gpus_expected=16)
    assert clock.floor == gflops.floor == Verdict.FAIL
    assert any("FAULTY" in note for note in clock.notes)
    assert clock.value is None  # no nvidia-smi samples came with it
    assert gflops.value == 6311.0


def test_soak_figures_read_the_samples_after_the_marker_and_find_the_first_throttle():
    header = "timestamp, index, temperature.gpu, clocks.current.sm [MHz], power.draw [W], clocks_event_reasons.active"
    rows = [
        "2026/11/30 23:59:50.000, 0, 40, 1980, 120.00, 0x0000000000000000",
        "2026/12/01 00:00:10.000, 0, 71, 1455, 690.00, 0x0000000000000004",
        "2026/12/01 00:10:10.000, 0, 93, 990, 450.00, 0x0000000000000068",
    ]
    burn = real("gpu-burn/gpu_burn-rtx-a500-1gpu-ok-issue124.txt")
    clock, _ = suites.soak_figures(f"{burn}{SOAK_SAMPLES_MARK}\n{header}\n" + "\n".join(rows) + "\n", gpus_expected=1)
    assert clock.value == 990 and clock.floor == Verdict.FAIL
    assert clock.series["gpus"]["0"]["t"] == [0.0, 20.0, 620.0]  # across midnight and a month's end
    assert "GPU 0: sw_thermal_slowdown, hw_thermal_slowdown from 620 s into the soak" in clock.notes


def test_process_grid_and_the_order_that_fits_memory():
    assert suites.process_grid(8) == (2, 4) and suites.process_grid(24) == (4, 6) and suites.process_grid(7) == (1, 7)
    n = suites.hpl_n(gpus=8, memory_gib=141, nb=1024)
    assert n % 1024 == 0 and 10 * n * n <= 0.8 * 8 * 141 * 2**30 < 10 * (n + 1024) ** 2
    assert suites.soak_interval_ms(900) == 1000 and suites.soak_interval_ms(14400) == 4000
