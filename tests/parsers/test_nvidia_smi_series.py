"""nvidia-smi --query-gpu=timestamp,... -lms series: each row keeps its time stamp, and 'parse auto' knows the tool."""

from apps.parsers import nvidia_smi, registry

HEADER = "timestamp, index, utilization.gpu [%], power.draw [W]"
SERIES = f"""{HEADER}
2026/11/30 09:00:00.000, 0, 50 %, 300.00 W
2026/11/30 09:00:00.000, 1, 52 %, 310.00 W
{HEADER}
2026/11/30 09:00:00.500, 0, 98 %, 690.00 W
2026/11/30 09:00:00.500, 1, 97 %, 688.00 W
"""


def test_a_timestamped_series_keeps_every_rows_time_stamp():
    report = nvidia_smi.parse_query_gpu(SERIES)

    assert [(gpu.timestamp, gpu.index, gpu.power_draw_w) for gpu in report.gpus] == [
        ("2026/11/30 09:00:00.000", 0, 300.0),
        ("2026/11/30 09:00:00.000", 1, 310.0),
        ("2026/11/30 09:00:00.500", 0, 690.0),
        ("2026/11/30 09:00:00.500", 1, 688.0),
    ]
    assert (report.timestamp, report.samples, report.attached_gpus) == ("2026/11/30 09:00:00.000", 2, 2)
    assert all("timestamp" not in gpu.extra for gpu in report.gpus)


def test_noheader_rows_with_a_leading_time_stamp_take_the_default_fields_after_it():
    row = "2026/11/30 09:00:00.000, " + ", ".join(["0", "GPU-x", "NVIDIA H200"] + ["[N/A]"] * 31)
    report = nvidia_smi.parse_query_gpu(row + "\n")

    (gpu,) = report.gpus
    assert (gpu.timestamp, gpu.index, gpu.uuid, gpu.name) == ("2026/11/30 09:00:00.000", 0, "GPU-x", "NVIDIA H200")


def test_a_query_without_timestamp_is_not_a_series():
    report = nvidia_smi.parse_query_gpu("index, power.draw [W]\n0, 100.00 W\n")
    assert (report.timestamp, report.samples, report.gpus[0].timestamp) == (None, None, None)


def test_parse_auto_tells_a_timestamped_series_with_or_without_header():
    assert registry.detect_tool(SERIES) == "nvidia_smi_query"
    assert registry.detect_tool("2026/11/30 09:00:00.123, 0, 50, 300.00\n") == "nvidia_smi_query"
    assert registry.detect_tool("2020/08/10 19:09:42 XidCriticalError: Xid=69 on Device=GPU-1\n") is None
