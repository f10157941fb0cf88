"""gpu-burn progress lines, per-GPU verdicts and CUDA errors."""

from apps.parsers.gpu_burn import parse_gpu_burn

from .helpers import assert_parse_error, real


def test_faulty_gpus_with_error_warnings():
    run = parse_gpu_burn(real("gpu-burn/gpu_burn-16gpu-faulty-warning-issue12-partial.txt"))

    assert run.status == "faulty" and run.tested == 16
    assert len(run.gpus) == 16 and {gpu.verdict for gpu in run.gpus} == {"FAULTY"}
    assert (run.gpus[0].gflops, run.gpus[0].errors, run.gpus[0].temperature_c) == (6311, 0, 51)
    assert run.gpus[1].errors == -524288000
    assert run.gpus[15].temperature_c == 52


def test_short_ok_run_without_progress_lines():
    run = parse_gpu_burn(real("gpu-burn/gpu_burn-rtx-a2000-no-progress-ok-issue124.txt"))

    assert run.status == "passed" and run.duration_s == 10 and run.precision == "FLOATS"
    [gpu] = run.gpus
    assert (gpu.name, gpu.verdict, gpu.memory_mb) == ("NVIDIA RTX A2000 Embedded GPU", "OK", 7866)


def test_run_that_printed_no_verdict_is_incomplete():
    run = parse_gpu_burn(real("gpu-burn/gpu_burn-rtx-a500-1gpu-ok-issue124.txt"))

    assert run.status == "incomplete" and run.progress_pct == 100.0
    assert (run.gpus[0].gflops, run.gpus[0].temperature_c, run.gpus[0].errors) == (3519, 53, 0)


def test_cuda_error_fails_the_run_even_with_ok_lines():
    run = parse_gpu_burn(real("gpu-burn/gpu_burn-v100-8gpu-cuda-error-unknown-issue123-partial.txt"))

    assert run.status == "failed"
    assert run.errors == ["Couldn't init a GPU test: Error: CUDA_ERROR_UNKNOWN"]
    assert len(run.gpus) == 8 and run.gpus[7].uuid == "GPU-143b6dac-9b44-419a-3799-ed5fcdf2552c"
    assert [gpu.verdict for gpu in run.gpus] == ["OK"] * 4 + [None] * 4
    assert {gpu.gflops for gpu in run.gpus} == {0.0}


def test_not_gpu_burn_output_is_rejected():
    assert_parse_error(parse_gpu_burn, "", 1, "empty input")
    # nvidia-smi -L prints the same 'GPU N: name (UUID: ...)' lines, but nothing else gpu_burn prints.
    assert_parse_error(parse_gpu_burn, real("h200-1gpu/nvidia-smi-L.txt"), 1, "gpu_burn output")
