"""HPL and HPL-MxP job output: results, residual checks, and runs that hung or were killed."""

from apps.parsers.hpl import parse_hpl, parse_hpl_mxp

from .helpers import assert_parse_error, real


def test_passed_cpu_run_behind_ucx_warnings():
    run = parse_hpl(real("hpl/hpl-2.3-cpu-128rank-8x16-passed-with-ucx-warnings.txt"))

    assert (run.program, run.status) == ("HPLinpack 2.3", "passed")
    [result] = run.results
    assert (result.variant, result.n, result.nb, result.p, result.q) == ("WR03C2C4", 421888, 256, 8, 16)
    assert (result.time_s, result.gflops) == (10393.68, 4816.5)
    assert (result.residual, result.residual_check) == (8.10420212e-04, "PASSED")
    assert (run.tests_passed, run.tests_failed, run.tests_skipped) == (1, 0, 0)
    assert run.errors == []


def test_interrupted_run_keeps_its_finished_results():
    run = parse_hpl(real("hpl/hpl-2.3-cpu-1node-interrupted-mpich-kish29.txt"))

    assert run.status == "interrupted"
    assert [result.variant for result in run.results] == ["WR00L2L2", "WR00L2L4", "WR00L2C2"]
    assert all(result.residual_check == "PASSED" for result in run.results)
    assert "BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES" in run.errors
    assert run.best_gflops == 4.6178e-06


def test_nvidia_hpl_that_stopped_after_matrix_generation_is_incomplete():
    run = parse_hpl(real("hpl/hpl-nvidia-25.4.0-a100-4gpu-incomplete-after-matgen.txt"))

    assert (run.program, run.status, run.results) == ("HPL-NVIDIA 25.4.0", "incomplete", [])


def test_failed_residual_check_fails_the_run():
    text = real("hpl/hpl-2.3-cpu-128rank-8x16-passed-with-ucx-warnings.txt").replace(
        "8.10420212e-04 ...... PASSED", "2.31000000e+01 ...... FAILED"
    )

    run = parse_hpl(text)

    assert run.status == "failed" and run.results[0].residual_check == "FAILED"


def test_hpl_mxp_passed_run_with_ansi_colours():
    run = parse_hpl_mxp(real("hpl-mxp/hpl-mxp-nvidia-25.9.0-a100-40gb-1gpu-n10000-passed-ansi.txt"))

    assert (run.program, run.status) == ("HPL-MxP-NVIDIA 25.9.0", "passed")
    assert (run.n, run.nb, run.nprow, run.npcol, run.sloppy_type) == (10000, 256, 1, 1, "FP16")
    assert (run.gflops, run.gflops_per_gpu) == (1365.1, 1365.08)
    assert (run.lu_gflops, run.lu_gflops_per_gpu) == (2083.1, 2083.10)
    assert (run.residual, run.residual_check) == (2.480394e-03, "PASSED")
    assert run.solver_residuals == [4.72199031e-04, 1.06084026e-09, 1.53097931e-14]
    assert run.progress_pct == 100.0


def test_hpl_mxp_hung_job_stdout_and_stderr():
    stdout = parse_hpl_mxp(real("hpl-mxp/hpl-mxp-nvidia-25.9.0-a100-4gpu-2x2-hung-cancelled.stdout.txt"))
    stderr = parse_hpl_mxp(real("hpl-mxp/hpl-mxp-nvidia-25.9.0-a100-4gpu-2x2-hung-cancelled.stderr.txt"))

    assert stdout.status == "incomplete" and stdout.gflops is None
    assert (stdout.n, stdout.nprow, stdout.npcol) == (90000, 2, 2)
    assert stderr.status == "interrupted"
    assert any("CANCELLED AT 2025-10-07T04:53:23" in error for error in stderr.errors)
    assert any("FAILED to prepare memory for KNEM" in error for error in stderr.errors)


def test_not_hpl_output_is_rejected():
    assert_parse_error(parse_hpl, "", 1, "empty input")
    assert_parse_error(parse_hpl, real("h200-1gpu/lscpu.txt"), 1, "HPLinpack")
    assert_parse_error(parse_hpl_mxp, "\nsome words\n", 2, "HPL-MxP output")
    # A classic HPL run that was killed is not an HPL-MxP result.
    assert_parse_error(parse_hpl_mxp, real("hpl/hpl-2.3-cpu-1node-interrupted-mpich-kish29.txt"), 1, "HPL-MxP")
