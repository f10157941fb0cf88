"""HPL-MxP (through mpirun), the burn-in soak (gpu_burn sampled by nvidia-smi) and the faults that move them, read by
the same parsers as the real captures in tests/fixtures/real."""

import pytest

from apps.inventory.models import Node
from apps.nodeexec.catalogue import HPL_SCRIPT, SOAK_SAMPLES_MARK, SOAK_SCRIPT
from apps.parsers.common import strip_ansi
from apps.parsers.gpu_burn import parse_gpu_burn
from apps.parsers.hpl import parse_hpl, parse_hpl_mxp
from apps.parsers.nvidia_smi import parse_query_gpu
from apps.simulator import services
from tests.simulator.conftest import real

MXP_REAL = "hpl-mxp/hpl-mxp-nvidia-25.9.0-a100-40gb-1gpu-n10000-passed-ansi.txt"


def hpl_mxp(hosts, *, n=258048, nb=1024, launcher="gpu001"):
    ranks = 8 * len(hosts)
    argv = ["mpirun", "--allow-run-as-root", "-np", str(ranks), "-H", ",".join(f"{host}:8" for host in hosts)]
    argv += ["--bind-to", "none", "--map-by", "slot", "hpl-mxp.sh", "--n", str(n), "--nb", str(nb)]
    argv += ["--nprow", "2" if ranks == 8 else "4", "--npcol", str(ranks // (2 if ranks == 8 else 4))]
    argv += ["--nporder", "row", "--gpu-affinity", "0:1:2:3:4:5:6:7"]
    return services.run_command(node=Node.objects.get(hostname=launcher), argv=argv)


def _section_titles(text: str) -> list[str]:
    return [line.strip() for line in strip_ansi(text).splitlines() if line.strip().startswith("******")]


def test_hpl_mxp_on_one_node_parses_like_the_real_run_and_reports_the_model(demo_cluster):
    output = hpl_mxp(["gpu001"])
    run, real_run = parse_hpl_mxp(output.stdout), parse_hpl_mxp(real(MXP_REAL))

    assert output.exit_code == 0
    assert run.status == real_run.status == "passed"
    assert run.program == "HPL-MxP-NVIDIA 25.9.0" and run.residual_check == "PASSED"
    assert (run.n, run.nb, run.nprow, run.npcol, run.sloppy_type) == (258048, 1024, 2, 4, "FP16")
    assert len(run.solver_residuals) == len(real_run.solver_residuals) == 3
    assert set(_section_titles(output.stdout)) == set(_section_titles(real(MXP_REAL)))
    # 8 x H200 at the 700 W cap: LU near the real 8 x H100 runs' ~310 TFLOPS per GPU
    assert 280_000 < run.lu_gflops_per_gpu < 340_000
    assert run.gflops < run.lu_gflops


def test_hpl_mxp_across_nodes_adds_the_broadcast_and_a_power_cap_slows_it(demo_cluster):
    one = parse_hpl_mxp(hpl_mxp(["gpu001"]).stdout)
    two = parse_hpl_mxp(hpl_mxp(["gpu001", "gpu002"], n=364544).stdout)
    assert two.status == "passed" and two.nprow * two.npcol == 16
    assert two.lu_gflops_per_gpu < one.lu_gflops_per_gpu * 1.05

    services.inject_fault(node=Node.objects.get(hostname="gpu001"), kind="power_cap", parameters={"watts": 450})
    capped = parse_hpl_mxp(hpl_mxp(["gpu001"]).stdout)
    assert capped.lu_gflops_per_gpu < one.lu_gflops_per_gpu * 0.85


def test_hpl_mxp_with_a_gpu_off_the_bus_aborts_without_a_figure(demo_cluster):
    services.inject_fault(node=Node.objects.get(hostname="gpu001"), kind="xid79", target="3")
    output = hpl_mxp(["gpu001"])
    run = parse_hpl_mxp(output.stdout + output.stderr)

    assert output.exit_code != 0
    assert run.gflops is None and run.status == "interrupted"
    assert any("invalid device ordinal" in error for error in run.errors)


def soak(node, seconds=900, interval_ms=10000):
    argv = ["sh", "-c", SOAK_SCRIPT, "rackpilot-soak", str(seconds), str(interval_ms)]
    output = services.run_command(node=node, argv=argv)
    burn, _, samples = output.stdout.partition(f"{SOAK_SAMPLES_MARK}\n")
    return output, parse_gpu_burn(burn), parse_query_gpu(samples)


def test_soak_prints_gpu_burn_and_timestamped_samples_in_the_real_formats(gpu_node):
    output, burn, samples = soak(gpu_node)
    real_burn = parse_gpu_burn(real("gpu-burn/gpu_burn-rtx-a500-1gpu-ok-issue124.txt"))

    assert output.exit_code == 0
    assert burn.status == "passed" and burn.tested == 8 and burn.duration_s == 900
    assert real_burn.precision == burn.precision == "FLOATS"
    assert all(gpu.verdict == "OK" and gpu.gflops > 30_000 for gpu in burn.gpus)
    assert samples.samples == 91 and samples.attached_gpus == 8
    first, last = samples.gpus[0], samples.gpus[-1]
    assert first.timestamp == "2026/11/30 09:00:00.000" and last.timestamp == "2026/11/30 09:15:00.000"
    assert last.temperature_c > first.temperature_c  # warming up under load
    assert "sw_power_cap" in last.clocks_event_reasons


def test_late_thermal_fault_throttles_only_after_its_delay(gpu_node):
    services.inject_fault(node=gpu_node, kind="late_thermal", target="2", parameters={"after_s": 600})
    _, burn, samples = soak(gpu_node)

    gpu2 = [gpu for gpu in samples.gpus if gpu.index == 2]
    before = [gpu for gpu in gpu2 if gpu.timestamp < "2026/11/30 09:10:00"]
    after = [gpu for gpu in gpu2 if gpu.timestamp >= "2026/11/30 09:10:00"]
    assert all("hw_thermal_slowdown" not in gpu.clocks_event_reasons for gpu in before)
    assert all("hw_thermal_slowdown" in gpu.clocks_event_reasons and gpu.clocks_sm_mhz <= 990 for gpu in after)
    assert burn.gpus[2].gflops < 0.8 * burn.gpus[1].gflops
    _, short_burn, short = soak(gpu_node, seconds=300)
    assert not any("hw_thermal_slowdown" in gpu.clocks_event_reasons for gpu in short.gpus)


HPL_REAL = "hpl/hpl-2.3-cpu-128rank-8x16-passed-with-ucx-warnings.txt"


def classic_hpl(hosts, *, n=200704, nb=1024, launcher="gpu001"):
    ranks = 8 * len(hosts)
    p = 2 if ranks == 8 else 4
    argv = ["sh", "-c", HPL_SCRIPT, "rackpilot-hpl", str(n), str(nb), str(p), str(ranks // p), str(ranks)]
    argv.append(",".join(f"{host}:8" for host in hosts))
    return services.run_command(node=Node.objects.get(hostname=launcher), argv=argv)


def _hpl_out_lines(text: str) -> list[str]:
    """The lines of HPL.out that do not depend on the run (its figures, settings and dates aside)."""
    fixed = ("T/V ", "- The", "      ||Ax-b||", "Finished", "End of Tests.", "An explanation", "HPLinpack 2.3")
    return [line for line in text.splitlines() if line.startswith(fixed)]


def test_classic_hpl_prints_hpl_out_like_the_real_run_and_reports_the_fp64_model(demo_cluster):
    output = classic_hpl(["gpu001"])
    run, real_run = parse_hpl(output.stdout), parse_hpl(real(HPL_REAL))

    assert output.exit_code == 0
    assert run.status == real_run.status == "passed" and run.program == real_run.program == "HPLinpack 2.3"
    [result] = run.results
    assert (result.n, result.nb, result.p, result.q, result.residual_check) == (200704, 1024, 2, 4, "PASSED")
    assert run.tests_passed == 1 and run.tests_failed == 0
    assert _hpl_out_lines(output.stdout) == _hpl_out_lines(real(HPL_REAL))
    # 8 x H200: FP64 tensor cores at the loaded 1455 MHz (49.2 TFLOPS a GPU) at HPL's efficiency, less the panels
    assert 38_000 < result.gflops / 8 < 49_200
    assert result.time_s == pytest.approx(2 / 3 * 200704**3 / (result.gflops * 1e9), rel=0.01)


def test_classic_hpl_across_nodes_is_paced_by_a_power_capped_gpu_and_ecc_fails_the_residual(demo_cluster):
    alone = parse_hpl(classic_hpl(["gpu005"], launcher="gpu005").stdout).results[0].gflops / 8
    services.inject_fault(node=Node.objects.get(hostname="gpu006"), kind="power_cap", parameters={"watts": 350})
    across = parse_hpl(classic_hpl(["gpu005", "gpu006"], n=282624, launcher="gpu005").stdout).results[0]
    assert across.gflops / 16 < alone * 0.8  # bulk-synchronous: the capped node sets the pace

    services.inject_fault(node=Node.objects.get(hostname="gpu007"), kind="ecc", target="2")
    wrong = parse_hpl(classic_hpl(["gpu007"], launcher="gpu007").stdout)
    assert wrong.status == "failed" and wrong.results[0].residual_check == "FAILED" and wrong.tests_failed == 1
