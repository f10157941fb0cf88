"""nccl-tests: text in every header generation, launcher prefixes, -J JSON, and failed runs."""

import pytest

from apps.parsers.nccl_tests import nccl_version_from_code, parse_nccl_tests, parse_nccl_tests_json

from .helpers import assert_parse_error, real


def test_two_node_h100_run_full_table_and_average():
    result = parse_nccl_tests(real("nccl-tests/all_reduce_perf-h100-a3mega-2node-16gpu-tcpxo.txt"))

    assert result.status == "completed"
    assert result.avg_busbw_gb_per_s == 70.742
    assert result.out_of_bounds == 0
    assert len(result.rows) == 31
    assert {device.host for device in result.devices} == {"ztan-mig-235z", "ztan-mig-gq73"}
    assert len(result.devices) == 16 and result.devices[15].rank == 15
    last = result.rows[-1]
    assert (last.size_bytes, last.count, last.dtype, last.redop, last.root) == (8 << 30, 2 << 30, "float", "sum", -1)
    out_of_place = last.out_of_place
    assert (out_of_place.time_us, out_of_place.algbw_gb_per_s, out_of_place.busbw_gb_per_s) == (47535, 180.71, 338.82)
    assert last.in_place.busbw_gb_per_s == 337.35 and last.in_place.wrong == 0
    assert result.peak_busbw_gb_per_s == 338.82


def test_versions_and_collective_from_the_header():
    result = parse_nccl_tests(real("nccl-tests/all_gather_perf-gb10-2node-2gpu-16G-gb10-training.txt"))

    assert (result.collective, result.nccl_tests_version, result.nccl_version) == ("all_gather", "2.18.5", "2.28.9")
    assert result.avg_busbw_gb_per_s == 22.9611
    assert result.rows[0].redop == "none"
    assert result.parameters["ngpus"] == 1 and result.parameters["min_bytes"] == 17179869184


def test_h200_text_and_json_reports_agree():
    text = parse_nccl_tests(real("h200-1gpu/nccl-tests-all_reduce_perf-1gpu.txt"))
    json_report = parse_nccl_tests(real("h200-1gpu/nccl-tests-all_reduce_perf-1gpu.json"))

    assert text.collective == json_report.collective == "all_reduce"
    assert text.nccl_version == json_report.nccl_version == "2.28.3"
    assert [row.size_bytes for row in text.rows] == [row.size_bytes for row in json_report.rows]
    assert len(text.rows) == 28 and text.rows[-1].size_bytes == 1073741824
    assert text.avg_busbw_gb_per_s == json_report.avg_busbw_gb_per_s == 0  # one rank: busbw is 0 by definition
    assert json_report.devices[0].name == "NVIDIA H200" and json_report.devices[0].host == "vm"
    assert json_report.rows[0].root == -1 and json_report.errors == []
    assert json_report.parameters["min_bytes"] == text.parameters["min_bytes"] == 8


def test_old_table_format_with_error_column_and_mpirun_prefix():
    result = parse_nccl_tests(real("nccl-tests/all_reduce_perf-a100-p4d-2node-16gpu-efa-nccl2.9.9-debug-info-full.txt"))

    assert result.nccl_version == "2.9.9"
    assert result.avg_busbw_gb_per_s == 11.2432
    assert len(result.rows) == 30 and len(result.devices) == 16
    first = result.rows[0]
    assert first.root is None  # the old format has no root column
    assert first.out_of_place.error == 2e-07 and first.out_of_place.wrong is None
    assert first.in_place.time_us == 176.3


def test_srun_prefixed_table_without_footer_is_incomplete():
    result = parse_nccl_tests(real("nccl-tests/all_reduce_perf-h100-p5-2node-16gpu-efa-srun-prefixed-table-only.txt"))

    assert result.status == "incomplete"
    assert len(result.rows) == 32 and result.avg_busbw_gb_per_s is None
    assert result.rows[-1].out_of_place.busbw_gb_per_s == 487.09


def test_mpirun_tag_output_table():
    result = parse_nccl_tests(real("nccl-tests/all_reduce_perf-p5-awsbatch-mpirun-tag-output-table-only.txt"))

    assert result.avg_busbw_gb_per_s == 156.742 and len(result.rows) == 32


def test_in_place_wrong_na_becomes_none():
    row = parse_nccl_tests(real("nccl-tests/alltoall_perf-rtx5090-1gpu-nccl-tests-issue287.txt")).rows[0]

    assert row.out_of_place.wrong == 0
    assert row.in_place.wrong is None


def test_old_header_only_partial_keeps_devices():
    result = parse_nccl_tests(
        real("nccl-tests/alltoall_perf-a100-sxm-80gb-8gpu-oldformat-header-partial-nccl-tests-issue100.txt")
    )

    assert result.status == "incomplete" and result.rows == []
    assert [device.pci_bus for device in result.devices][:2] == ["0x0e", "0x13"]
    assert result.devices[0].group is None and result.devices[0].host == "node2"


@pytest.mark.parametrize(
    ("fixture", "first_error"),
    [
        ("nccl-tests/all_reduce_perf-h100-8gpu-cuda-init-failure.txt", "Test CUDA failure common.cu:941"),
        (
            "nccl-tests/alltoall_perf-h800-2node-16gpu-illegal-memory-access-nccl-tests-issue355.txt",
            "Test CUDA failure common.cu:389 'an illegal memory access was encountered'",
        ),
        ("h200-1gpu/nccl-tests-error-too-few-gpus.txt", "Invalid number of GPUs: 2 requested but only 1 were found."),
    ],
)
def test_failed_runs_are_results_with_errors(fixture, first_error):
    result = parse_nccl_tests(real(fixture))

    assert result.status == "failed"
    assert result.rows == []
    assert result.errors[0].startswith(first_error)


def test_nccl_warn_lines_are_reported_as_errors():
    result = parse_nccl_tests(
        real("nccl-tests/nccl-warn-net-ib-error12-test-failure-v100-partial-nccl-tests-issue24.txt")
    )

    assert result.status == "failed"
    assert any("Got completion with error 12" in error for error in result.errors)
    assert "Test NCCL failure common.cu:343 'unhandled cuda error'" in result.errors


@pytest.mark.parametrize(
    ("code", "version"), [(22803, "2.28.3"), (22809, "2.28.9"), (21602, "2.16.2"), (2708, "2.7.8")]
)
def test_nccl_version_codes(code, version):
    assert nccl_version_from_code(code) == version


def test_not_nccl_tests_output_is_rejected():
    assert_parse_error(parse_nccl_tests, "", 1, "empty input")
    assert_parse_error(parse_nccl_tests, "\nhello world\n", 2, "nccl-tests output")
    assert_parse_error(parse_nccl_tests, real("dmesg/gpud-dmesg-with-xid-119.log"), 1, "'# nThread ...'")


def test_truncated_before_any_data_is_rejected():
    assert_parse_error(parse_nccl_tests, "# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803\n", 1)


def test_row_with_wrong_column_count_names_its_line():
    lines = real("h200-1gpu/nccl-tests-all_reduce_perf-check.txt").splitlines()
    lines[10] = lines[10].rsplit(maxsplit=2)[0]  # the data row loses its last two columns
    text = "\n".join(lines)

    assert_parse_error(parse_nccl_tests, text, 11, "13 columns")


def test_json_that_is_not_a_nccl_tests_report():
    assert_parse_error(parse_nccl_tests_json, '{"nvbandwidth": {}}', 1, "'config' and 'results'")
    assert_parse_error(parse_nccl_tests_json, '{"results": [', 1, "nccl-tests -J JSON")
