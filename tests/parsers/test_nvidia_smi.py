"""nvidia-smi in all its output formats, read from the real H200 capture and published outputs."""

import pytest

from apps.parsers import nvidia_smi, registry
from apps.parsers.errors import IncompleteOutput
from apps.parsers.nvidia_smi import (
    decode_clocks_event_reasons,
    parse_dmon,
    parse_gpu_list,
    parse_help_query_gpu,
    parse_nvlink_status,
    parse_query_gpu,
    parse_query_text,
    parse_query_xml,
    parse_smi_table,
    parse_topology,
)

from .helpers import assert_parse_error, real

H200_UUID = "GPU-00000000-1111-2222-3333-444444444444"


@pytest.mark.parametrize(
    ("parser", "fixture"),
    [
        (parse_query_gpu, "h200-1gpu/nvidia-smi-query-gpu.csv"),
        (parse_query_gpu, "h200-1gpu/nvidia-smi-query-gpu-noheader-nounits.csv"),
        (parse_query_text, "h200-1gpu/nvidia-smi-q.txt"),
        (parse_query_xml, "h200-1gpu/nvidia-smi-q-x.xml"),
    ],
)
def test_h200_identity_and_memory_agree_across_csv_text_and_xml(parser, fixture):
    report = parser(real(fixture))

    gpu = report.gpus[0]
    assert len(report.gpus) == 1
    assert (gpu.index, gpu.uuid, gpu.name, gpu.serial) == (0, H200_UUID, "NVIDIA H200", "1650000000001")
    assert gpu.pci_bus_id == "00000000:00:06.0"
    assert gpu.driver_version == "580.159.04"
    assert gpu.vbios_version == "96.00.A5.00.1A"
    assert gpu.memory_total_mib == 143771
    assert gpu.memory_used_mib == 0
    assert gpu.power_limit_w == 700.0
    assert (gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.pcie_width_current, gpu.pcie_width_max) == (5, 5, 16, 16)
    assert gpu.clocks_event_reasons == ["gpu_idle"]
    assert gpu.ecc_errors_uncorrected_volatile == 0


def test_query_csv_strips_units_maps_header_names_and_turns_na_into_none():
    gpu = parse_query_gpu(real("h200-1gpu/nvidia-smi-query-gpu.csv")).gpus[0]

    assert gpu.power_draw_w == 106.34
    assert gpu.clocks_sm_mhz == 375 and gpu.clocks_max_sm_mhz == 1980 and gpu.clocks_mem_mhz == 3201
    assert gpu.temperature_c == 37 and gpu.memory_temperature_c == 35
    assert gpu.fan_speed_pct is None  # printed as [N/A]
    assert (gpu.ecc_mode, gpu.persistence_mode, gpu.mig_mode, gpu.pstate) == ("Enabled", "Enabled", "Disabled", "P0")
    assert gpu.extra == {}


def test_query_csv_without_header_uses_the_given_field_order():
    text = "3, GPU-abc, NVIDIA H100 80GB HBM3, 81559\n"

    gpu = parse_query_gpu(text, fields=["index", "uuid", "name", "memory.total"]).gpus[0]

    assert (gpu.index, gpu.uuid, gpu.memory_total_mib) == (3, "GPU-abc", 81559)


def test_sw_power_cap_under_load_is_decoded_from_the_bitmask():
    # Invented row: the real H200 capture under a GEMM loop reports 0x4 (README); -q was captured before load.
    text = (
        "index, power.draw [W], power.limit [W], clocks.current.sm [MHz], clocks_event_reasons.active\n"
        "0, 690.12 W, 700.00 W, 1440 MHz, 0x0000000000000004\n"
    )

    gpu = parse_query_gpu(text).gpus[0]

    assert gpu.clocks_event_reasons == ["sw_power_cap"]
    assert (gpu.power_draw_w, gpu.power_limit_w, gpu.clocks_sm_mhz) == (690.12, 700.0, 1440)


def test_dmon_under_load_shows_the_power_cap_violation():
    dmon = parse_dmon(real("h200-1gpu/nvidia-smi-dmon-s-pucvmet-load.txt"))

    assert dmon.units["pwr"] == "W" and dmon.units["pviol"] == "%"
    assert [sample.values["pviol"] for sample in dmon.samples] == [0, 100, 100, 100]
    assert max(sample.values["pwr"] for sample in dmon.samples) == 690
    assert {sample.gpu for sample in dmon.samples} == {0}
    assert dmon.samples[-1].values["pclk"] == 1470


def test_dmon_idle_reads_every_column_it_printed():
    dmon = parse_dmon(real("h200-1gpu/nvidia-smi-dmon-idle.txt"))

    assert dmon.columns[:4] == ["gpu", "pwr", "gtemp", "mtemp"]
    assert len(dmon.samples) == 5
    assert dmon.samples[0].values["pwr"] == 91


@pytest.mark.parametrize(
    ("mask", "reasons"),
    [
        (0x0, []),
        (0x1, ["gpu_idle"]),
        (0x4, ["sw_power_cap"]),
        (0x8 | 0x40, ["hw_slowdown", "hw_thermal_slowdown"]),
        (0x20, ["sw_thermal_slowdown"]),
        (0x80 | 0x100, ["hw_power_brake_slowdown", "display_clock_setting"]),
        (0x1000, ["unknown_0x1000"]),
    ],
)
def test_clocks_event_reason_bits(mask, reasons):
    assert decode_clocks_event_reasons(mask) == reasons


def test_q_text_reads_active_reasons_nested_under_hw_slowdown():
    report = parse_query_text(real("nvidia-smi/q-h100-8gpu-driver535.161.08-gpud.txt"))

    assert len(report.gpus) == 8 and report.attached_gpus == 8
    assert [gpu.index for gpu in report.gpus] == list(range(8))
    assert report.gpus[0].clocks_event_reasons == ["hw_slowdown", "hw_power_brake_slowdown"]
    assert report.gpus[0].power_draw_w == 67.74  # 535 prints 'Power Draw'
    assert report.gpus[7].pci_bus_id == "00000000:DB:00.0"


def test_q_excerpt_reports_ecc_errors_and_pending_row_remap():
    with pytest.raises(IncompleteOutput) as caught:  # the author elided the other seven GPUs of 'Attached GPUs : 8'
        parse_query_text(real("nvidia-smi/q-excerpt-a100-80gb-ecc-remapped-rows-partial.txt"))
    gpu = caught.value.partial.gpus[0]

    assert gpu.name == "NVIDIA A100-SXM4-80GB"
    assert gpu.ecc_errors_corrected_volatile == 177
    assert gpu.ecc_errors_uncorrected_volatile == 0
    assert gpu.remapped_rows_correctable == 1
    assert gpu.remapped_rows_pending is True
    assert gpu.remapped_rows_failure is False


def test_q_old_driver_power_fields_and_disabled_ecc():
    report = parse_query_text(real("nvidia-smi/q-i0-h800-driver525.txt"), selected=True)

    gpu = report.gpus[0]
    assert report.attached_gpus == 8 and len(report.gpus) == 1  # -i 0 prints one of eight
    assert gpu.power_draw_w == 74.71 and gpu.power_limit_w == 700.0
    assert gpu.ecc_mode == "Disabled"
    assert gpu.ecc_errors_corrected_volatile is None  # N/A when ECC is off


def test_q_selected_sections_leave_the_rest_empty():
    gpu = parse_query_text(real("h200-1gpu/nvidia-smi-q-d-perf-under-load.txt")).gpus[0]

    assert gpu.power_draw_w == 79.44
    assert gpu.name is None and gpu.memory_total_mib is None


def test_xml_carries_the_same_power_readings_as_text():
    report = parse_query_xml(real("h200-1gpu/nvidia-smi-q-x.xml"))

    assert report.cuda_version == "13.0"
    assert report.gpus[0].power_draw_w == 109.38
    assert report.gpus[0].remapped_rows_pending is False


def test_topology_a800_links_numa_affinity_and_nic_legend():
    topology = parse_topology(real("nvidia-smi/topo-m-a800-8gpu-4nic-nv8.txt"))

    assert [gpu.name for gpu in topology.gpus] == [f"GPU{i}" for i in range(8)]
    assert [nic.nic_device for nic in topology.nics] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    gpu0, gpu7 = topology.gpus[0], topology.gpus[7]
    assert gpu0.nvlink_peers == {f"GPU{i}": 8 for i in range(1, 8)}
    assert gpu0.links["NIC0"] == "NODE" and gpu0.links["NIC2"] == "SYS"
    assert gpu7.links["NIC2"] == "PIX"
    assert (gpu0.cpu_affinity, gpu0.numa_affinity) == ("0-31,64-95", 0)
    assert gpu7.numa_affinity == 1 and gpu7.cpus[:2] == [32, 33]
    assert "NV#" in topology.legend


def test_topology_of_the_single_h200_ignores_ansi_and_tabs():
    topology = parse_topology(real("h200-1gpu/nvidia-smi-topo-m.txt"))

    assert topology.columns == ["GPU0"]
    gpu = topology.gpus[0]
    assert gpu.links == {"GPU0": "X"}
    assert (gpu.cpu_affinity, gpu.numa_affinity, gpu.gpu_numa_id) == ("0-15", 0, None)


def test_nvlink_status_per_gpu_speeds():
    status = parse_nvlink_status(real("nvidia-smi/nvlink-status-a100-sxm4-80gb-8gpu-gpud.txt"))

    assert len(status.gpus) == 8
    assert all(gpu.active_links == 12 for gpu in status.gpus)
    assert {link.speed_gbps for gpu in status.gpus for link in gpu.links} == {25.0}
    assert status.gpus[0].uuid == "GPU-5269b708-678a-b1a8-60f0-c90406537486"


def test_nvlink_status_skips_elided_gpus():
    status = parse_nvlink_status(real("nvidia-smi/nvlink-status-h800-8gpu-partial.txt"))

    assert [gpu.index for gpu in status.gpus] == [0, 1, 7]
    assert status.gpus[2].links[7].speed_gbps == 26.562


def test_nvlink_inactive_links_and_empty_output():
    text = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n"

    gpu = parse_nvlink_status(text).gpus[0]

    assert [(link.link, link.active, link.speed_gbps) for link in gpu.links] == [(0, True, 26.562), (1, False, None)]
    assert parse_nvlink_status(real("h200-1gpu/nvidia-smi-nvlink-s.txt")).gpus == []


def test_default_table_h100():
    table = parse_smi_table(real("nvidia-smi/nvidia-smi-default-h100-8gpu-driver560.txt"))

    assert (table.driver_version, table.cuda_version) == ("560.35.03", "12.6")
    assert len(table.gpus) == 8 and table.processes == []
    gpu = table.gpus[3]
    assert (gpu.index, gpu.name, gpu.bus_id) == (3, "NVIDIA H100 80GB HBM3", "00000000:5D:00.0")
    assert (gpu.temperature_c, gpu.power_draw_w, gpu.power_cap_w) == (35, 73, 700)
    assert (gpu.memory_used_mib, gpu.memory_total_mib, gpu.mig_mode) == (1, 81559, "Disabled")


def test_default_table_gb10_without_memory_reporting_lists_processes():
    table = parse_smi_table(real("nvidia-smi/nvidia-smi-default-dgx-spark-gb10-driver580.txt"))

    gpu = table.gpus[0]
    assert gpu.memory_total_mib is None and gpu.power_cap_w is None and gpu.power_draw_w == 4
    assert [(process.pid, process.name, process.memory_mib) for process in table.processes] == [
        (2804, "/usr/lib/xorg/Xorg", 179),
        (3060, "/usr/bin/gnome-shell", 48),
    ]


def test_gpu_list_and_help_query():
    listed = parse_gpu_list(real("h200-1gpu/nvidia-smi-L.txt"))
    help_text = parse_help_query_gpu(real("h200-1gpu/nvidia-smi-help-query-gpu.txt"))

    assert [(gpu.index, gpu.uuid) for gpu in listed.gpus] == [(0, H200_UUID)]
    assert {"memory.total", "clocks_event_reasons.active", "clocks_throttle_reasons.active"} <= help_text.names()
    assert set(nvidia_smi.QUERY_GPU_FIELDS) - help_text.names() <= {"clocks.current.sm", "clocks.current.memory"}


# --- inputs that are not this tool's output ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "parser",
    [parse_query_gpu, parse_query_text, parse_query_xml, parse_topology, parse_dmon, parse_smi_table, parse_gpu_list],
)
def test_empty_input_is_rejected_at_line_1(parser):
    assert_parse_error(parser, "", 1, "empty input")


def test_other_tools_output_is_rejected_with_the_line():
    lscpu = real("h200-1gpu/lscpu.txt")

    assert_parse_error(parse_query_text, lscpu, 1, "NVSMI LOG")
    assert_parse_error(parse_topology, lscpu, 1, "GPU0")
    assert_parse_error(parse_smi_table, lscpu, 1, "NVIDIA-SMI")
    assert_parse_error(parse_query_xml, lscpu, 1, "XML")
    assert_parse_error(parse_dmon, "\n\nrandom words here\n", 3, "dmon header")
    assert_parse_error(parse_nvlink_status, "GPU 0: X (UUID: GPU-1)\nsomething else\n", 2, "Link N")


def test_truncated_outputs_are_rejected_after_their_header():
    csv_header = real("h200-1gpu/nvidia-smi-query-gpu.csv").splitlines()[0] + "\n"
    topo_header = real("nvidia-smi/topo-m-a800-8gpu-4nic-nv8.txt").splitlines()[0] + "\n"
    q_banner = "\n==============NVSMI LOG==============\n\nDriver Version : 580.159.04\n"

    assert_parse_error(parse_query_gpu, csv_header, 2, "end of input")
    assert_parse_error(parse_topology, topo_header, 2, "end of input")
    assert_parse_error(parse_query_text, q_banner, 5, "'GPU <bus id>' section")


def test_csv_row_with_missing_values_names_its_line():
    text = real("h200-1gpu/nvidia-smi-query-gpu.csv") + "1, GPU-x, NVIDIA H200\n"

    assert_parse_error(parse_query_gpu, text, 3, "34 comma-separated values, got 3")


def test_csv_bad_bitmask_names_its_line():
    text = "index, clocks_event_reasons.active\n0, busy\n"

    assert_parse_error(parse_query_gpu, text, 2, "hex bitmask")


# --- output cut between records says so (issue 27) ------------------------------------------------------------


def _first_lines(relative: str, count: int) -> str:
    """The first ``count`` lines of a real fixture: the same output cut where a dropped connection would cut it."""
    return "\n".join(real(relative).split("\n")[:count]) + "\n"


def test_q_with_fewer_gpu_sections_than_attached_gpus_is_incomplete():
    cut = _first_lines("nvidia-smi/q-h100-8gpu-driver535.161.08-gpud.txt", 1443)  # before the 8th 'GPU ...' line

    with pytest.raises(IncompleteOutput) as caught:
        parse_query_text(cut)

    error = caught.value
    assert error.line == 1443  # past the last line held, where the eighth section should have begun
    assert "'Attached GPUs : 8' (line 8) declares that many GPUs, the output holds a section for 7 of them" in str(
        error
    )
    assert str(error).startswith("line 1443: incomplete: ")
    assert len(error.partial.gpus) == 7


def test_q_cut_inside_its_last_gpu_section_is_incomplete_even_when_the_count_is_met():
    text = real("nvidia-smi/q-h100-8gpu-driver535.161.08-gpud.txt")
    cut = "\n".join(text.split("\n")[:1500]) + "\n"

    with pytest.raises(IncompleteOutput, match=r"'GPU 00000000:DB:00.0' \(line 1444\) stops after"):
        parse_query_text(cut)


def test_q_of_selected_gpus_may_hold_fewer_sections():
    report = parse_query_text(_first_lines("nvidia-smi/q-h100-8gpu-driver535.161.08-gpud.txt", 1443), selected=True)

    assert len(report.gpus) == 7 and report.attached_gpus == 8


def test_q_xml_with_fewer_gpu_elements_than_attached_gpus_is_incomplete():
    text = real("h200-1gpu/nvidia-smi-q-x.xml").replace(
        "<attached_gpus>1</attached_gpus>", "<attached_gpus>2</attached_gpus>"
    )

    with pytest.raises(
        IncompleteOutput,
        match=r"<attached_gpus>2</attached_gpus> declares that many GPUs, the document holds a <gpu> element for 1 of",
    ):
        parse_query_xml(text)


def test_default_table_cut_between_gpu_blocks_is_incomplete():
    cut = _first_lines("nvidia-smi/nvidia-smi-default-h100-8gpu-driver560.txt", 32)  # GPUs 0-5 of 8

    with pytest.raises(IncompleteOutput) as caught:
        parse_smi_table(cut)

    assert caught.value.line == 33
    assert "stops after GPU 5 without its Processes box" in str(caught.value)
    assert [gpu.index for gpu in caught.value.partial.gpus] == [0, 1, 2, 3, 4, 5]


def test_default_table_cut_inside_a_gpu_block_is_incomplete():
    cut = _first_lines("nvidia-smi/nvidia-smi-default-h100-8gpu-driver560.txt", 13)

    with pytest.raises(IncompleteOutput, match=r"the block of GPU 1 \(line 13\) stops after its first row"):
        parse_smi_table(cut)


def test_default_table_with_a_process_on_a_gpu_without_a_row_is_incomplete():
    lines = real("nvidia-smi/nvidia-smi-default-h100-8gpu-driver560.txt").split("\n")
    process = "|    7   N/A  N/A      4242      C   python                                      80000MiB |"
    text = "\n".join([*lines[:28], *lines[40:46], process, *lines[47:]])  # GPU rows 5-7 lost, GPU 7's process kept

    with pytest.raises(IncompleteOutput, match=r"process 4242 runs on GPU 7 \(line 35\), and the table has no row"):
        parse_smi_table(text)


def test_topology_missing_the_rows_its_header_announces_is_incomplete():
    cut = _first_lines("nvidia-smi/topo-m-a800-8gpu-4nic-nv8.txt", 11)  # NIC2 and NIC3 rows lost

    with pytest.raises(IncompleteOutput) as caught:
        parse_topology(cut)

    assert caught.value.line == 12
    assert "the header (line 1) announces 12 devices, the matrix has no row for NIC2, NIC3" in str(caught.value)
    assert len(caught.value.partial.gpus) == 8


@pytest.mark.parametrize(
    "fixture",
    [
        "nvidia-smi/topo-p2p-r-h100-8gpu-all-ok-ml-engineering.txt",
        "nvidia-smi/topo-p2p-r-l4-2gpu-cns-no-legend-ml-engineering.txt",
    ],
)
def test_a_p2p_status_matrix_is_not_taken_for_topo_m(fixture):
    assert_parse_error(parse_topology, real(fixture), 2, "this is `nvidia-smi topo -p2p` output")


def test_p2p_matrix_is_read_as_peer_to_peer_status():
    ok = nvidia_smi.parse_p2p(real("nvidia-smi/topo-p2p-r-h100-8gpu-all-ok-ml-engineering.txt"))
    l4 = nvidia_smi.parse_p2p(real("nvidia-smi/topo-p2p-r-l4-2gpu-cns-no-legend-ml-engineering.txt"))

    assert ok.gpus == [f"GPU{i}" for i in range(8)] and ok.pairs_not_ok() == []
    assert ok.legend["CNS"] == "Chipset not supported"
    assert l4.pairs_not_ok() == [("GPU0", "GPU1", "CNS"), ("GPU1", "GPU0", "CNS")]
    assert l4.legend == {}


def test_p2p_parser_refuses_a_topo_m_matrix():
    assert_parse_error(nvidia_smi.parse_p2p, real("nvidia-smi/topo-m-a800-8gpu-4nic-nv8.txt"), 2, "status codes")


def test_numa_affinity_list_keeps_every_node():
    lines = real("nvidia-smi/topo-m-8gpu-nv18-no-nic-partial.txt").split("\n")
    # a GPU near several NUMA nodes prints a list, as Linux id lists go ('0,3-9,11-17'); the rest is the real output
    lines[1] = lines[1].replace("0-51,104-155    0", "0-51,104-155    0,3-9,11-17")
    topology = parse_topology("\n".join(lines))

    gpu0, gpu1 = topology.gpus[:2]
    assert gpu0.numa_nodes == [0, *range(3, 10), *range(11, 18)]
    assert gpu0.numa_affinity is None  # several nodes: no single one to claim
    assert (gpu1.numa_nodes, gpu1.numa_affinity) == ([0], 0)
    assert gpu0.cpus == [*range(0, 52), *range(104, 156)]


def test_dmon_with_time_column_is_recognised_by_content():
    # `nvidia-smi dmon -o T` puts a '#Time' column before 'gpu' (its header as nvidia-smi prints it)
    text = (
        "#Time        gpu   pwr gtemp mtemp    sm   mem   enc   dec  mclk  pclk\n"
        "#HH:MM:SS    Idx     W     C     C     %     %     %     %   MHz   MHz\n"
        " 17:36:40      0    71    33     -     0     0     0     0  2619  1980\n"
        " 17:36:40      1    72    34     -     5     1     0     0  2619  1980\n"
    )

    assert registry.detect_tool(text) == "nvidia_smi_dmon"
    dmon = parse_dmon(text)
    assert dmon.columns[:2] == ["Time", "gpu"] and dmon.units["Time"] == "HH:MM:SS"
    assert [(sample.gpu, sample.values["Time"], sample.values["pwr"]) for sample in dmon.samples] == [
        (0, "17:36:40", 71.0),
        (1, "17:36:40", 72.0),
    ]
