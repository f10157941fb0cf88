"""The JSON written by Rackpilot's NVML and PyTorch probes on the H200 node."""

from apps.parsers.nvml import parse_nvml_snapshot, parse_nvml_timeseries, struct_fields
from apps.parsers.torch_bench import parse_torch_benchmarks

from .helpers import assert_parse_error, real


def test_nvml_snapshot():
    snapshot = parse_nvml_snapshot(real("h200-1gpu/nvml-snapshot.json"))

    assert (snapshot.name, snapshot.driver_version, snapshot.pci_bus_id) == (
        "NVIDIA H200",
        "580.159.04",
        "00000000:00:06.0",
    )
    assert snapshot.memory_total_bytes == 150754820096
    assert (snapshot.power_w, snapshot.power_limit_w, snapshot.power_min_limit_w) == (123.282, 700, 200)
    assert snapshot.ecc_enabled is True and snapshot.mig_enabled is False
    assert snapshot.clocks_event_reasons == [] and snapshot.compute_capability == "9.0"
    assert len(snapshot.nvlinks) == 18 and snapshot.nvlinks[0].error == "NVMLError_NotSupported: Not Supported"


def test_nvml_struct_repr():
    assert struct_fields("c_nvmlUtilization_t(gpu: 0 %, memory: 0 %)") == {"gpu": "0 %", "memory": "0 %"}


def test_nvml_timeseries_of_the_serving_run():
    series = parse_nvml_timeseries(real("h200-1gpu/nvml-timeseries-serving-run.json"))

    assert len(series.samples) == 121
    assert series.samples[0].power_w == 121.698
    assert series.max_power_w > 690
    assert series.mean_gpu_util_pct > 85
    assert series.energy_j == round(series.samples[-1].energy_j - series.samples[0].energy_j, 3)


def test_torch_benchmarks():
    bench = parse_torch_benchmarks(real("h200-1gpu/node-benchmarks-torch.json"))

    assert round(bench.d2d_copy_gb_per_s) == 4210  # 88% of the 4.8 TB/s datasheet
    assert round(bench.gemm_tflops["bf16"]) == 755 and round(bench.gemm_tflops["fp8_e4m3"]) == 1342
    assert [solve.n for solve in bench.hpl_mxp_like] == [16384, 32768]
    assert bench.serving.latency_p99_ms < 100 and bench.serving.kwh_per_million_tokens < 0.5


def test_other_json_is_rejected():
    assert_parse_error(parse_nvml_snapshot, "", 1, "empty input")
    assert_parse_error(parse_nvml_snapshot, real("h200-1gpu/lsblk.json"), 1, "NVML snapshot")
    assert_parse_error(parse_nvml_timeseries, real("h200-1gpu/nvml-snapshot.json"), 1, "'t' field")
    assert_parse_error(parse_torch_benchmarks, real("h200-1gpu/nvml-snapshot.json"), 1, "'torch'")
