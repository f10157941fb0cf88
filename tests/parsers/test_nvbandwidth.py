"""nvbandwidth text matrices with SUM lines, and the -j JSON report."""

from apps.parsers.nvbandwidth import parse_nvbandwidth

from .helpers import assert_parse_error, real


def test_all_testcases_from_the_h800_run():
    report = parse_nvbandwidth(real("nvbandwidth/h800-8gpu-v0.2-all-tests.txt"))

    assert (report.version, report.cuda_runtime_version, report.driver_version) == ("v0.2", "11080", "525.105.17")
    assert report.devices == ["NVIDIA H800"] * 8
    assert len(report.testcases) == 30
    assert {case.status for case in report.testcases} == {"passed"}
    read = report.testcase("device_to_device_memcpy_read_ce")
    assert read.sum == 9643.22 and read.unit == "GB/s"
    assert len(read.matrix) == 8 and read.matrix[0][0] is None  # the diagonal is N/A
    assert read.matrix[5][6] == 172.32
    h2d = report.testcase("host_to_device_memcpy_ce")
    assert h2d.rows == ["0"] and h2d.sum == 442.52 and h2d.min == 55.28


def test_single_testcase_summary_statistics():
    case = parse_nvbandwidth(real("nvbandwidth/h800-8gpu-v0.2-d2d-read-ce.txt")).testcases[0]

    assert case.sum == 9642.08
    assert (case.min, case.max) == (171.88, 172.57)


def test_json_report_with_waived_testcases():
    report = parse_nvbandwidth(real("nvbandwidth/nvbandwidth-v0.5-json-1gpu-dcgm-test-input.json"))

    assert (report.version, report.driver_version) == ("v0.5", "565.02")
    assert len(report.testcases) == 32
    assert report.testcase("device_to_device_memcpy_read_ce").status == "waived"
    h2d = report.testcase("host_to_device_memcpy_ce")
    assert h2d.status == "passed" and h2d.matrix == [[12.3964]] and h2d.sum == 12.39636129125
    assert report.testcase("host_device_latency_sm").unit == "ns"


def test_not_nvbandwidth_output_is_rejected():
    assert_parse_error(parse_nvbandwidth, "", 1, "empty input")
    assert_parse_error(parse_nvbandwidth, real("h200-1gpu/proc-meminfo.txt"), 1, "nvbandwidth Version")
    assert_parse_error(parse_nvbandwidth, '{"nvbandwidth": []}', 1, "'nvbandwidth' object")


def test_truncated_and_malformed_matrices():
    header = "\n".join(real("nvbandwidth/h800-8gpu-v0.2-d2d-read-ce.txt").splitlines()[:18]) + "\n"
    lines = real("nvbandwidth/h800-8gpu-v0.2-d2d-read-ce.txt").splitlines()
    lines[23] = lines[23].rsplit(maxsplit=1)[0]  # row 1 of the matrix loses a value

    assert_parse_error(parse_nvbandwidth, header, 19, "end of input")
    assert_parse_error(parse_nvbandwidth, "\n".join(lines), 24, "8 values")
