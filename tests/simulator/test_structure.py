"""Simulated output has the structure of the real tools' output: same header lines, columns, field names, tags."""

import re
import xml.etree.ElementTree as ElementTree

from apps.parsers import nccl_tests
from apps.parsers.common import strip_ansi
from apps.simulator.tools.common import util_linux_json
from apps.simulator.tools.nccl import format_row
from tests.simulator.conftest import real

# The exact field list of the real capture (README of h200-1gpu), aliases included.
REAL_QUERY_FIELDS = (
    "index,uuid,name,serial,pci.bus_id,driver_version,vbios_version,memory.total,memory.used,memory.free,"
    "utilization.gpu,utilization.memory,temperature.gpu,temperature.memory,power.draw,power.limit,power.max_limit,"
    "clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,pcie.link.gen.current,pcie.link.gen.max,"
    "pcie.link.width.current,pcie.link.width.max,ecc.errors.corrected.volatile.total,"
    "ecc.errors.uncorrected.volatile.total,ecc.mode.current,persistence_mode,compute_mode,mig.mode.current,fan.speed,"
    "pstate,clocks_throttle_reasons.active"
)


def _cell_layout(line: str) -> list[int]:
    return [position for position, char in enumerate(line) if char == "|"]


def test_summary_table_matches_the_real_layout(run):
    ours = run("nvidia-smi").stdout.splitlines()
    theirs = real("h200-1gpu/nvidia-smi.txt").splitlines()
    assert ours[1:8] == theirs[1:8]  # title rule, version line, header rows
    assert ours[-7:] == theirs[-7:]  # the processes block
    for offset in range(3):  # each GPU's three rows put their cell borders where the real ones are
        assert _cell_layout(ours[8 + offset]) == _cell_layout(theirs[8 + offset])
    assert re.fullmatch(r"\|   0  NVIDIA H200 +On  \|   00000000:18:00\.0 Off \| +0 \|", ours[8])
    assert len([line for line in ours if "NVIDIA H200" in line]) == 8


def test_query_gpu_header_is_the_real_header(run):
    ours = run("nvidia-smi", f"--query-gpu={REAL_QUERY_FIELDS}", "--format=csv").stdout.splitlines()
    theirs = real("h200-1gpu/nvidia-smi-query-gpu.csv").splitlines()
    assert ours[0] == theirs[0]
    assert len(ours) == 9
    ours_cells, theirs_cells = ours[1].split(", "), theirs[1].split(", ")
    assert len(ours_cells) == len(theirs_cells)
    for mine, other in zip(ours_cells, theirs_cells, strict=True):  # same units after each value
        assert mine.rsplit(" ", 1)[-1] == other.rsplit(" ", 1)[-1] or " " not in other


def test_query_gpu_noheader_nounits_has_bare_values(run):
    ours = run("nvidia-smi", f"--query-gpu={REAL_QUERY_FIELDS}", "--format=csv,noheader,nounits").stdout
    theirs = real("h200-1gpu/nvidia-smi-query-gpu-noheader-nounits.csv")
    first = ours.splitlines()[0].split(", ")
    assert len(first) == len(theirs.splitlines()[0].split(", "))
    assert "MiB" not in ours and " W" not in ours and "MHz" not in ours
    assert first[7] == "143771"


def _text_keys(text: str, first_gpu_only: bool = True) -> list[str]:
    keys, in_gpu = [], 0
    for line in text.splitlines():
        if line.startswith("GPU 0000"):
            in_gpu += 1
            if in_gpu > 1 and first_gpu_only:
                break
        keys.append(line.split(" : ")[0].rstrip() if " : " in line else line.rstrip())
    return [key for key in keys if not key.startswith("GPU 0000")]


def test_q_text_has_the_real_sections_and_fields_in_order(run):
    ours = _text_keys(run("nvidia-smi", "-q").stdout)
    theirs = _text_keys(real("h200-1gpu/nvidia-smi-q.txt"))
    assert ours == theirs


def test_q_display_filter_matches_the_real_selection(run):
    displays = "PERFORMANCE,CLOCK,POWER,TEMPERATURE,ECC,PAGE_RETIREMENT,ROW_REMAPPER"
    ours = _text_keys(run("nvidia-smi", "-q", "-d", displays).stdout)
    theirs = _text_keys(real("h200-1gpu/nvidia-smi-q-d-perf-clock-power-temp-ecc.txt"))
    assert ours == theirs


def _gpu_tags(text: str) -> list[list[str]]:
    root = ElementTree.fromstring(text)
    return [[element.tag for element in gpu.iter()] for gpu in root.findall("gpu")]


def test_q_xml_has_the_real_elements_per_gpu(run):
    ours = _gpu_tags(run("nvidia-smi", "-q", "-x").stdout)
    theirs = _gpu_tags(real("h200-1gpu/nvidia-smi-q-x.xml"))
    assert len(ours) == 8
    assert set(ours[0]) == set(theirs[0])
    assert all(tags == theirs[0] for tags in ours)  # same elements, same order, same nesting


def test_q_xml_prologue_matches(run):
    ours = run("nvidia-smi", "-q", "-x").stdout.splitlines()
    theirs = real("h200-1gpu/nvidia-smi-q-x.xml").splitlines()
    assert ours[:3] == theirs[:3]
    assert ours[-2:] == theirs[-2:]


def test_topo_legend_and_header_match_real_8gpu_8nic_output(run):
    ours = strip_ansi(run("nvidia-smi", "topo", "-m").stdout).splitlines()
    legend = real("h200-1gpu/nvidia-smi-topo-m.txt").splitlines()
    start = legend.index("Legend:")
    assert ours[ours.index("Legend:") : ours.index("Legend:") + 9] == legend[start : start + 9]
    real_header = real("nvidia-smi/topo-m-h20-3e-8gpu-8nic-nv18-sglang31046.txt").splitlines()[0]
    assert re.split(r"\t+", ours[0].strip()) == re.split(r"\s{2,}", real_header.strip())
    assert (
        ours[-9:]
        == [
            "NIC Legend:",
            "",
            *(f"  NIC{k}: mlx5_{k}" for k in range(8)),
        ][-9:]
    )


def test_topo_uses_tabs_and_underline_like_the_driver(run):
    raw = run("nvidia-smi", "topo", "-m").stdout
    first_real = real("h200-1gpu/nvidia-smi-topo-m.txt").splitlines()[0]
    assert raw.startswith("\t\x1b[4mGPU0\t") and first_real.startswith("\t\x1b[4mGPU0\t")
    assert raw.splitlines()[0].endswith("GPU NUMA ID\x1b[0m")


def test_nvlink_status_lines_look_like_the_real_ones(run):
    ours = run("nvidia-smi", "nvlink", "-s").stdout.splitlines()
    theirs = real("nvidia-smi/nvlink-status-h800-8gpu-partial.txt").splitlines()
    assert ours[1] == theirs[1]
    assert re.fullmatch(r"GPU 0: NVIDIA H200 \(UUID: GPU-[0-9a-f-]{36}\)", ours[0])
    assert len(ours) == 8 * 19


def test_dmon_headers_are_the_real_ones(run):
    loaded = run("nvidia-smi", "dmon", "-c", "4", "-s", "pucvmet", load=1.0).stdout.splitlines()
    assert loaded[:2] == real("h200-1gpu/nvidia-smi-dmon-s-pucvmet-load.txt").splitlines()[:2]
    idle = run("nvidia-smi", "dmon", "-c", "5").stdout.splitlines()
    assert idle[:2] == real("h200-1gpu/nvidia-smi-dmon-idle.txt").splitlines()[:2]
    assert len(idle) == 2 + 5 * 8
    real_row = real("h200-1gpu/nvidia-smi-dmon-idle.txt").splitlines()[2]
    assert len(idle[2]) == len(real_row)


def test_util_linux_json_reproduces_real_lsblk_and_lscpu_bytes():
    import json

    for name in ("h200-1gpu/lsblk.json", "h200-1gpu/lscpu.json"):
        text = real(name)
        assert util_linux_json(json.loads(text)) + "\n" == text


def test_lsblk_devices_have_the_real_keys_in_order(run):
    import json

    ours = json.loads(run("lsblk", "-J", "-b", "-o", "NAME,SIZE,TYPE,MODEL,ROTA,TRAN,MOUNTPOINT").stdout)
    theirs = json.loads(real("h200-1gpu/lsblk.json"))
    keys = list(theirs["blockdevices"][0])
    assert all(list(device)[: len(keys)] == keys for device in ours["blockdevices"])


def test_lscpu_text_aligns_values_like_the_real_one(run):
    ours = run("lscpu").stdout.splitlines()
    theirs = real("h200-1gpu/lscpu.txt").splitlines()
    assert ours[0] == theirs[0]
    column = theirs[0].index("x86_64")
    assert all(len(line) > column and line[column - 1] == " " and line[column] != " " for line in ours)


def test_numactl_lines_have_the_real_shapes(run):
    ours = run("numactl", "-H").stdout.splitlines()
    assert ours[0] == "available: 2 nodes (0-1)"
    theirs = real("h200-1gpu/numactl-H.txt").splitlines()
    assert ours[-4] == theirs[-3]  # 'node distances:'
    assert re.fullmatch(r"node    0   1 ", ours[-3]) and re.fullmatch(r"  0:   10  21 ", ours[-2])


def test_meminfo_lines_are_aligned_like_the_kernel(run):
    ours = run("cat", "/proc/meminfo").stdout.splitlines()
    theirs = real("h200-1gpu/proc-meminfo.txt").splitlines()
    assert ours[0].startswith("MemTotal:       ") and theirs[0].startswith("MemTotal:       ")
    huge = next(line for line in theirs if line.startswith("HugePages_Total"))
    assert next(line for line in ours if line.startswith("HugePages_Total")) == huge


def test_nccl_tests_header_matches_the_real_2_19_6_output(run):
    ours = run("all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "8").stdout.splitlines()
    theirs = real("h200-1gpu/nccl-tests-all_reduce_perf-1gpu.txt").splitlines()
    assert ours[0] == theirs[1]  # version line
    assert ours[1] == theirs[2]
    table = ours.index(theirs[8])
    assert ours[table : table + 3] == theirs[8:11]
    assert ours[-6] == theirs[-7] == "# Out of bounds values : 0 OK"
    assert re.fullmatch(r"# Avg bus bandwidth    : \d+(\.\d+)? ", ours[-5])
    assert ours[-4:] == theirs[-5:-1]


def test_nccl_row_formatter_reproduces_every_real_row():
    """The number formatting (nccl-tests' getFloatStr) rebuilds the real rows byte for byte."""
    text = real("h200-1gpu/nccl-tests-all_reduce_perf-1gpu.txt")
    rows = [line for line in text.splitlines() if re.match(r"^\s+\d+\s+\d+\s+float", line)]
    parsed = nccl_tests.parse_nccl_tests(text).rows
    assert len(rows) == len(parsed) > 20
    for line, row in zip(rows, parsed, strict=True):
        cells = line.split()
        rebuilt = format_row(
            row.size_bytes,
            row.count,
            row.dtype,
            row.redop,
            row.root,
            [
                (float(cells[5]), float(cells[6]), float(cells[7]), cells[8]),
                (float(cells[9]), float(cells[10]), float(cells[11]), cells[12]),
            ],
        )
        assert rebuilt == line


def test_mlnx_qos_prints_the_real_lines(run):
    ours = run("mlnx_qos", "-i", "ens1np0").stdout.splitlines()
    theirs = real("network/mlnx_qos-trust-dscp-pfc3-connectx-att-netarbiter.txt").splitlines()
    assert ours[:15] == theirs[:15]  # trust, DSCP map, cable, PFC header and the enabled row (PFC on priority 3)
    assert ours[16:] == theirs[15:]  # the ETS classes (we also print the buffer row, as newer mlnx_qos does)


def test_ethtool_driver_keys_match(run):
    ours = [line.split(":")[0] for line in run("ethtool", "-i", "ens1np0").stdout.splitlines()]
    theirs = [line.split(":")[0] for line in real("network/ethtool-i-mlx5-connectx4-ethq-issue8.txt").splitlines()]
    assert ours == theirs


def test_ibstat_and_ibv_devinfo_keys_match(run):
    def keys(text: str, stop: str) -> list[str]:
        block = text.split(stop)[1] if stop in text else text
        return [line.split(":")[0].strip() for line in block.splitlines() if ":" in line]

    ibstat = run("ibstat").stdout
    real_ibstat = real("infiniband/gpud-ibstat.47.0.h100.all.active.0.txt")
    assert keys(ibstat, "CA 'mlx5_1'")[:16] == keys(real_ibstat.split("CA 'mlx5_1'")[0], "\x00")[:16]
    devinfo = run("ibv_devinfo").stdout.split("\n\n")[0]
    real_devinfo = real("infiniband/ibv_devinfo-dgx-spark-gb10-4port-cx7-roce.txt").split("\n\n")[0]
    assert keys(devinfo, "\x00") == keys(real_devinfo, "\x00")


def test_nvbandwidth_matrix_layout_matches(run):
    ours = run("nvbandwidth", "-t", "device_to_device_memcpy_read_ce").stdout.splitlines()
    theirs = real("nvbandwidth/h800-8gpu-v0.2-d2d-read-ce.txt").splitlines()
    start, real_start = (
        ours.index("Running device_to_device_memcpy_read_ce."),
        theirs.index("Running device_to_device_memcpy_read_ce."),
    )
    assert ours[start + 1 : start + 3] == theirs[real_start + 1 : real_start + 3]
    assert _cell_widths(ours[start + 3]) == _cell_widths(theirs[real_start + 3])
    assert ours[3:5] == theirs[3:5]  # the NOTE lines


def _cell_widths(line: str) -> list[int]:
    return [match.end() for match in re.finditer(r"\S+", line)]


def test_dcgmi_diag_table_rows_are_the_real_width(run):
    ours = run("dcgmi", "diag", "-r", "3").stdout.splitlines()
    theirs = real("dcgm/dcgmi-diag-r3-rtxpro6000-2gpu-dcgm3.3.9-pass.txt").splitlines()
    assert ours[1:6] == theirs[2:7]  # rules, title, metadata banner, version
    assert all(len(line) == 78 for line in ours[1:])
    assert [line for line in ours if line.startswith("+-----  ")] == [
        line for line in theirs[: len(theirs) // 2 + 1] if line.startswith("+-----  ")
    ]
