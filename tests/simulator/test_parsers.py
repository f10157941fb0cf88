"""Everything the simulator prints is read back by the parser of the real tool, healthy or faulted."""

import pytest

from apps.parsers import registry
from apps.parsers.nvidia_smi import CLOCKS_EVENT_REASON_BITS, QUERY_GPU_FIELDS, parse_query_gpu, parse_query_text
from apps.simulator import services
from apps.simulator.model import REASON_BITS

QUERY = ",".join(QUERY_GPU_FIELDS)

# (argv, parser name). Every command a discovery, an acceptance check or a runbook reads.
COMMANDS = [
    (["nvidia-smi"], "nvidia_smi_table"),
    (["nvidia-smi", "-L"], "nvidia_smi_list"),
    (["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv"], "nvidia_smi_query"),
    (["nvidia-smi", "-q"], "nvidia_smi_q"),
    (["nvidia-smi", "-q", "-x"], "nvidia_smi_xml"),
    (
        ["nvidia-smi", "-q", "-d", "PERFORMANCE,CLOCK,POWER,TEMPERATURE,ECC,PAGE_RETIREMENT,ROW_REMAPPER"],
        "nvidia_smi_q",
    ),
    (["nvidia-smi", "topo", "-m"], "nvidia_smi_topo"),
    (["nvidia-smi", "nvlink", "-s"], "nvidia_smi_nvlink"),
    (["nvidia-smi", "dmon", "-c", "3", "-s", "pucvmet"], "nvidia_smi_dmon"),
    (["nvidia-smi", "dmon", "-c", "2"], "nvidia_smi_dmon"),
    (["ip", "-j", "link"], "ip_link"),
    (["ip", "link", "show"], "ip_link"),
    (["ethtool", "ens1np0"], "ethtool"),
    (["ethtool", "eno1"], "ethtool"),
    (["ethtool", "-i", "ens1np0"], "ethtool_driver"),
    (["mlnx_qos", "-i", "ens3np0"], "mlnx_qos"),
    (["ibstat"], "ibstat"),
    (["ibv_devinfo"], "ibv_devinfo"),
    (["lscpu"], "lscpu"),
    (["lscpu", "-J"], "lscpu"),
    (["numactl", "-H"], "numactl"),
    (["lsblk", "-J", "-b", "-o", "NAME,SIZE,TYPE,MODEL,ROTA,TRAN,MOUNTPOINT"], "lsblk"),
    (["cat", "/proc/meminfo"], "meminfo"),
    (["dmesg"], "dmesg"),
    (["dmesg", "--time-format", "iso"], "dmesg"),
    (["all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "8"], "nccl_tests"),
    (["all_gather_perf", "-b", "1M", "-e", "1G", "-f", "4", "-g", "8"], "nccl_tests"),
    (["reduce_scatter_perf", "-b", "1M", "-e", "64M", "-f", "2", "-g", "8"], "nccl_tests"),
    (["alltoall_perf", "-b", "1M", "-e", "64M", "-f", "2", "-g", "8"], "nccl_tests"),
    (["broadcast_perf", "-b", "1M", "-e", "64M", "-f", "2", "-g", "8"], "nccl_tests"),
    (["nvbandwidth"], "nvbandwidth"),
    (["dcgmi", "diag", "-r", "1"], "dcgm_diag"),
    (["dcgmi", "diag", "-r", "3"], "dcgm_diag"),
]

FAULTS = [
    ("mtu", "ens1np0"),
    ("pfc_off", "3"),
    ("nvlink_down", "2"),
    ("xid79", "3"),
    ("ecc", "1"),
    ("thermal", "4"),
    ("pcie_downtrained", "5"),
    ("nic_down", "ens2np0"),
    ("disk_full", "/scratch"),
    ("corrupt_checkpoint", ""),
    ("straggler", ""),
]


@pytest.mark.parametrize(("argv", "tool"), COMMANDS, ids=[" ".join(argv)[:60] for argv, _ in COMMANDS])
@pytest.mark.parametrize("load", [0.0, 1.0])
def test_simulated_output_parses_and_is_recognised(run, argv, tool, load):
    result = run(*argv, load=load)
    assert result.exit_code == 0, result.stderr
    parsed = registry.parse(tool, result.stdout)
    assert parsed is not None
    assert registry.detect_tool(result.stdout) in (tool, *_also_detected(tool))


def _also_detected(tool: str) -> tuple[str, ...]:
    # The detector cannot tell a -q -d selection from -q; both are the -q parser anyway.
    return {"nvidia_smi_dmon": (), "ethtool_driver": ()}.get(tool, ())


def test_every_output_parses_on_a_node_with_every_fault(gpu_node, run):
    for kind, target in FAULTS:
        services.inject_fault(node=gpu_node, kind=kind, target=target)
    for argv, tool in COMMANDS:
        result = run(*argv)
        if argv[0].endswith("_perf"):
            # a GPU off the bus or with uncorrectable ECC stops nccl-tests: the failure output still parses
            assert result.exit_code != 0
            assert registry.parse(tool, result.stdout).status == "failed"
            continue
        if argv[0] == "dcgmi":
            assert result.exit_code == 1
        else:
            assert result.exit_code == 0, (argv, result.stderr)
        registry.parse(tool, result.stdout)


def test_noheader_query_parses_with_the_default_field_list(run):
    result = run("nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits")
    report = parse_query_gpu(result.stdout)
    assert [gpu.index for gpu in report.gpus] == list(range(8))
    assert report.gpus[0].memory_total_mib == 143771
    assert report.gpus[0].clocks_event_reasons == ["gpu_idle"]


def test_catalogue_query_parses(run):
    """The fields the nodeexec catalogue asks for (noheader, nounits)."""
    fields = "index,name,uuid,pci.bus_id,driver_version,memory.total,temperature.gpu,power.draw"
    result = run("nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits")
    report = parse_query_gpu(result.stdout, fields.split(","))
    assert report.gpus[7].pci_bus_id == "00000000:DB:00.0"
    assert report.driver_version == "580.159.04"


def test_the_simulated_card_sets_the_clocks_event_bits_the_parsers_read():
    """The simulator may not import the parsers' bit table, so it keeps the card's side of nvml.h: the two must be
    one table, or a simulated mask would decode to reasons the card never named."""
    assert {name: bit for bit, name in CLOCKS_EVENT_REASON_BITS.items()} == REASON_BITS


def test_the_mask_and_the_q_report_name_the_same_reasons_on_a_hot_card(gpu_node, run):
    services.inject_fault(node=gpu_node, kind="thermal", target="4")
    fields = "index,clocks_event_reasons.active,clocks_event_reasons.supported"
    masks = parse_query_gpu(run("nvidia-smi", f"--query-gpu={fields}", "--format=csv", load=1.0).stdout)
    named = parse_query_text(run("nvidia-smi", "-q", load=1.0).stdout)

    # -q prints its sections in its own order, the mask decodes lowest bit first
    assert set(masks.gpus[4].clocks_event_reasons) == set(named.gpus[4].clocks_event_reasons)
    assert "hw_thermal_slowdown" in masks.gpus[4].clocks_event_reasons
    assert masks.gpus[0].clocks_event_reasons == named.gpus[0].clocks_event_reasons == ["sw_power_cap"]
    assert masks.gpus[0].extra["clocks_event_reasons.supported"] == "0x00000000000001ff"
