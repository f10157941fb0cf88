"""dcgmi diag (text and JSON), discovery -l and nvlink -s."""

import json

import pytest

from apps.parsers.dcgm import (
    overall_status,
    parse_dcgm_diag,
    parse_dcgm_diag_json,
    parse_dcgm_discovery,
    parse_dcgm_nvlink,
)
from apps.parsers.errors import IncompleteOutput

from .helpers import assert_parse_error, real


def test_failed_diag_names_the_failing_test_per_gpu_and_its_message():
    runs = parse_dcgm_diag(real("dcgm/dcgmi-diag-r3-h100-8gpu-dcgm3.3.8-fail-cuinit.txt"))

    assert runs.status == "fail" and len(runs.runs) == 1
    report = runs.runs[0]
    assert (report.dcgm_version, report.driver_version) == ("3.3.8", "560.35.03")
    assert report.gpu_device_ids == ["2330"] * 8
    [memory] = report.failed()
    assert (memory.name, memory.category, memory.gpus) == ("GPU Memory", "Hardware", "all")
    assert memory.per_gpu == {str(gpu): "fail" for gpu in range(8)}
    assert len(memory.messages) == 8
    # The table wraps text mid-word at a fixed width; the message is joined back exactly.
    assert "Unable to initialize CUDA library: 'system not yet initialized'" in memory.messages[0]
    assert memory.messages[0].startswith("GPU 0 Error using CUDA API cuInit")


def test_info_rows_do_not_change_a_pass():
    report = parse_dcgm_diag(real("dcgm/dcgmi-diag-r3-h100-8gpu-dcgm3.3.8-fail-cuinit.txt")).runs[0]

    persistence = next(test for test in report.tests if test.name == "Persistence Mode")
    assert persistence.status == "pass"
    assert "Enable persistence mode by running" in persistence.messages[0]
    assert [test.status for test in report.tests if test.category == "Stress"] == ["skip", "skip"]


def test_two_interleaved_srun_reports_are_two_runs():
    runs = parse_dcgm_diag(real("dcgm/dcgmi-diag-r3-rtxpro6000-2gpu-dcgm3.3.9-pass.txt"))

    assert len(runs.runs) == 2
    assert runs.status == "pass"
    assert all(run.gpu_device_ids == ["2bb5", "2bb5"] for run in runs.runs)
    assert [test.name for test in runs.runs[1].tests][-2:] == ["Memory Bandwidth", "EUD Test"]


def test_json_after_a_warning_line_with_null_entries():
    runs = parse_dcgm_diag(real("dcgm/dcgmi-diag-json-8gpu-dcgm3.x-with-warning-prefix-dcgm-test.txt"))

    report = runs.runs[0]
    assert report.dcgm_version == "3.1.0"
    assert report.warnings == ["WARNING: THIS SHOULD NOT HAPPEN"]
    assert len(report.tests) == 10  # nine deployment tests and one custom, nulls skipped
    software = report.tests[-1]
    assert (software.name, software.category, software.status) == ("software", "Custom", "pass")
    assert software.per_gpu == {str(gpu): "pass" for gpu in range(8)}


def test_json_failure_with_warning_messages():
    failure = {"gpu_id": "0", "status": "Fail", "warnings": [{"warning": "GPU 0 has 2 row remap errors"}]}
    test = {"name": "GPU Memory", "results": [failure, {"gpu_id": "1", "status": "Pass"}]}
    text = json.dumps(
        {"DCGM GPU Diagnostic": {"version": "3.3.8", "test_categories": [{"category": "Hardware", "tests": [test]}]}}
    )

    report = parse_dcgm_diag_json(text)

    assert report.status == "fail"
    assert report.tests[0].per_gpu == {"0": "fail", "1": "pass"}
    assert report.tests[0].messages == ["GPU 0 has 2 row remap errors"]


def test_overall_status_is_the_worst():
    assert overall_status(["pass", "skip", "warn"]) == "warn"
    assert overall_status(["pass", "fail"]) == "fail"
    assert overall_status([]) == "skip"


def test_discovery_and_nvlink():
    discovery = parse_dcgm_discovery(real("dcgm/dcgmi-discovery-l-h800-8gpu.txt"))
    links = parse_dcgm_nvlink(real("dcgm/dcgmi-nvlink-s-h800-8gpu.txt"))

    assert discovery.gpus_reported == 8 and len(discovery.gpus) == 8
    assert discovery.gpus[7].pci_bus_id == "00000000:E2:00.0"
    assert discovery.gpus[0].uuid == "GPU-34bf77d1-c686-6821-79a8-32d326c5039c"
    assert discovery.nvswitches == []
    assert len(links.gpus) == 8 and links.nvswitches == []
    assert links.gpus[0].links.count("up") == 8 and links.gpus[0].links.count("not_supported") == 10


def test_not_dcgmi_output_is_rejected():
    assert_parse_error(parse_dcgm_diag, "", 1, "empty input")
    assert_parse_error(parse_dcgm_diag, real("h200-1gpu/lscpu.txt"), 1, "| Diagnostic | Result |")
    assert_parse_error(parse_dcgm_discovery, "\nGPU stuff\n", 2, "GPUs found")
    assert_parse_error(parse_dcgm_nvlink, real("h200-1gpu/nvidia-smi-L.txt"), 1, "NvLink Link Status")
    assert_parse_error(parse_dcgm_diag_json, '{"something": 1}', 1, "DCGM GPU Diagnostic")


def test_truncated_diag_table_is_rejected():
    head = "\n".join(real("dcgm/dcgmi-diag-r3-h100-8gpu-dcgm3.3.8-fail-cuinit.txt").splitlines()[:4]) + "\n"

    assert_parse_error(parse_dcgm_diag, head, 5, "end of input")


def test_nvlink_row_with_garbage_states_names_its_line():
    text = "NvLink Link Status\nGPUs:\n    gpuId 0:\n        U U ? U\n"

    assert_parse_error(parse_dcgm_nvlink, text, 4, "link states")


# --- DCGM 4.x text layout and cut output (issue 27) ------------------------------------------------------------


def test_dcgm4_per_gpu_rows_are_results_not_device_ids():
    report = parse_dcgm_diag(real("dcgm/dcgmi-diag-r2-b200-8gpu-dcgm4.4.1-pcie-fail-slurm-dcgm-issue253.txt")).runs[0]

    assert report.dcgm_version == "4.4.1"
    assert report.gpu_device_ids == ["2901"] * 8  # not cut to '290', no 'GPU0: Pass' among them
    assert [(test.category, test.name, test.status) for test in report.tests] == [
        ("Deployment", "software", "pass"),
        ("Hardware", "memory", "pass"),
        ("Integration", "pcie", "fail"),
    ]
    pcie = report.tests[2]
    assert pcie.per_gpu == {str(gpu): "pass" for gpu in range(8)}
    assert pcie.messages == [
        "There was an internal error during the test: 'Output of child process (11167) couldn't be parsed: '* Line 1, "
        "Column 1   Syntax error: value, object or array expected. '' Check DCGM and system logs for errors. Reset "
        "GPU. Restart DCGM. Rerun diagnostics."
    ]
    assert report.status == "fail"


def test_dcgm4_single_gpu_pass():
    runs = parse_dcgm_diag(real("dcgm/dcgmi-diag-r2-i0-a10g-1gpu-dcgm4.4.2-pass-dcgm-issue124.txt"))

    report = runs.runs[0]
    assert runs.status == "pass" and report.gpu_device_ids == ["2237"]
    assert [test.per_gpu for test in report.tests] == [{"0": "pass"}] * 3


def test_diag_cut_before_its_hardware_section_is_incomplete_not_a_pass():
    lines = real("dcgm/dcgmi-diag-r2-i0-a10g-1gpu-dcgm4.4.2-pass-dcgm-issue124.txt").split("\n")
    cut = "\n".join(lines[:11]) + "\n"  # ends after 'software' and 'GPU0: Pass', before Hardware

    with pytest.raises(IncompleteOutput) as caught:
        parse_dcgm_diag(cut)

    assert caught.value.line == 12
    assert "starts at line 3 stops without its closing border; the sections after 'Deployment'" in str(caught.value)
    assert [test.name for test in caught.value.partial.runs[0].tests] == ["software"]


def test_dcgm4_published_without_its_closing_border_is_incomplete_and_keeps_every_warning():
    with pytest.raises(IncompleteOutput) as caught:
        parse_dcgm_diag(real("dcgm/dcgmi-diag-l40s-4gpu-dcgm4.2.3-pcie-fail-dcgm-issue253.txt"))

    report = caught.value.partial.runs[0]
    assert report.gpu_device_ids == ["26b9"] * 4
    assert len(report.tests[-1].messages) == 4 and report.tests[-1].status == "fail"
