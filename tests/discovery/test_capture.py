"""Capturing this host's tool outputs as anonymised fixtures, and `manage.py discover` run in-process.

The capture tests run the real tools of this host (no GPU here: nvidia-smi is reported as skipped, never faked).
"""

import io
import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from apps.discovery import capture
from apps.discovery.capture import Anonymiser, CaptureCommand, Output, anonymise, fixture_problem, write_output
from apps.parsers import nvidia_smi, registry
from apps.parsers.common import read_input

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
H200 = REAL / "h200-1gpu"
H200_FILES = ("nvidia-smi-L.txt", "nvidia-smi-q.txt", "nvidia-smi-q-x.xml", "nvidia-smi-query-gpu.csv")
# Identifiers as they stand in the h200-1gpu fixture (its UUID and serial are placeholders already; the PDI is real).
FIXTURE_UUID = "GPU-00000000-1111-2222-3333-444444444444"
FIXTURE_SERIAL = "1650000000001"
FIXTURE_PDI = "0x9f32f490fbe34f17"
FIRST_GPU = "GPU-00000000-0000-0000-0000-000000000001"
HAS_NVIDIA_SMI = shutil.which("nvidia-smi") is not None
CPU_AND_NETWORK_FILES = ("lscpu.txt", "lscpu.json", "proc-meminfo.txt", "lsblk.json", "ip-j-link.json")


def anonymised_h200(*names: str) -> dict[str, str]:
    mapping = Anonymiser(hostnames=("h200-vm.example.org", "h200-vm"))
    return {name: anonymise(read_input(H200 / name), mapping) for name in names}


# --- the anonymiser, on the real H200 files ---------------------------------------------------------------------


def test_anonymised_h200_files_hold_none_of_the_original_identifiers():
    files = anonymised_h200(*H200_FILES, "nvidia-smi-query-gpu-noheader-nounits.csv")

    for name, text in files.items():
        assert FIXTURE_UUID not in text, name
        assert FIXTURE_SERIAL not in text, name
        assert FIXTURE_PDI not in text, name
        assert FIRST_GPU in text, name  # the one GPU is the first placeholder, in every file


def test_one_gpu_keeps_one_placeholder_and_serial_across_files():
    files = anonymised_h200(*H200_FILES)

    reports = [
        nvidia_smi.parse_query_text(files["nvidia-smi-q.txt"]),
        nvidia_smi.parse_query_xml(files["nvidia-smi-q-x.xml"]),
        nvidia_smi.parse_query_gpu(files["nvidia-smi-query-gpu.csv"]),
    ]
    assert {gpu.uuid for report in reports for gpu in report.gpus} == {FIRST_GPU}
    serials = {gpu.serial for report in reports for gpu in report.gpus}
    assert len(serials) == 1 and len(serials.pop()) == len(FIXTURE_SERIAL)
    assert nvidia_smi.parse_gpu_list(files["nvidia-smi-L.txt"]).gpus[0].uuid == FIRST_GPU


@pytest.mark.parametrize("name", [*H200_FILES, "nvidia-smi-query-gpu-noheader-nounits.csv"])
def test_anonymised_h200_files_still_parse_to_the_same_gpu(name):
    text = anonymised_h200(name)[name]
    tool = registry.tool_for_fixture(H200 / name)

    assert fixture_problem(H200 / name, text, tool) is None
    gpus = registry.parse(tool, text).gpus
    assert len(gpus) == 1
    if tool != "nvidia_smi_list":
        assert gpus[0].memory_total_mib == 143771


def test_macs_and_infiniband_guids_are_replaced_and_the_outputs_still_parse():
    mapping = Anonymiser()
    ibstat_path = REAL / "infiniband" / "gpud-ibstat.47.0.h100.all.active.0.txt"
    ibstat = anonymise(read_input(ibstat_path), mapping)
    ip_link_text = (
        '[{"ifindex":1,"ifname":"ib0","flags":["UP"],"mtu":4092,"operstate":"UP","link_type":"infiniband",'
        '"address":"00:00:10:49:fe:80:00:00:00:00:00:00:a0:88:c2:03:00:e3:14:2a",'
        '"broadcast":"00:ff:ff:ff:ff:12:40:1b:ff:ff:00:00:00:00:00:00:ff:ff:ff:ff"},'
        '{"ifindex":2,"ifname":"eth0","flags":["UP"],"mtu":9000,"operstate":"UP","link_type":"ether",'
        '"address":"b8:3f:d2:aa:bb:cc","broadcast":"ff:ff:ff:ff:ff:ff","permaddr":"B8:3F:D2:AA:BB:CD"}]'
    )
    ip_link = anonymise(ip_link_text, mapping)

    assert "0xa088c20300e3142a" not in ibstat and "a0:88:c2:03:00:e3:14:2a" not in ip_link
    # The node GUID ibstat printed and the GUID part of ib0's address are one value: one placeholder.
    assert "Node GUID: 0x0000000000000001" in ibstat
    assert '"address":"00:00:10:49:fe:80:00:00:00:00:00:00:00:00:00:00:00:00:00:01"' in ip_link
    assert '"00:ff:ff:ff:ff:12:40:1b:ff:ff:00:00:00:00:00:00:ff:ff:ff:ff"' in ip_link  # broadcast kept
    assert '"address":"02:00:00:00:00:01","broadcast":"ff:ff:ff:ff:ff:ff","permaddr":"02:00:00:00:00:02"' in ip_link
    assert fixture_problem(Path("node/ibstat.txt"), ibstat, "ibstat") is None
    links = registry.parse("ip_link", ip_link).links
    assert [link.address for link in links] == [
        "00:00:10:49:fe:80:00:00:00:00:00:00:00:00:00:00:00:00:00:01",
        "02:00:00:00:00:01",
    ]


def test_the_host_name_is_replaced_as_a_whole_word_only():
    mapping = Anonymiser(hostnames=("gpu7.dc1.example.org", "gpu7", "localhost"))

    text = anonymise("gpu7 gpu7.dc1.example.org gpu77 localhost /home/alice/run.py\n", mapping)

    assert text == "node01 node01 gpu77 localhost /home/user/run.py\n"


# --- commands and checks ------------------------------------------------------------------------------------------


def test_a_missing_tool_a_failing_command_and_a_timeout_are_reasons_in_words():
    env = capture.command_env()
    outputs = capture.run_all(
        [
            CaptureCommand("a.txt", ("rackpilot-no-such-tool",), "lscpu"),
            CaptureCommand("b.txt", ("ls", "/rackpilot-no-such-path"), "lscpu"),
            CaptureCommand("c.txt", ("sleep", "5"), "lscpu", timeout=0.3),
            CaptureCommand("d.txt", ("sleep", "0"), "lscpu"),
        ],
        env,
    )

    reasons = [output.reason for output in outputs]
    assert reasons[0] == "rackpilot-no-such-tool is not installed"
    assert reasons[1].startswith("ls exited 2: ") and "rackpilot-no-such-path" in reasons[1]
    assert reasons[2] == "timed out after 0.3 s"
    assert reasons[3] == "an earlier sleep command timed out"  # a hung tool costs one timeout, not one per command
    assert all(output.text is None for output in outputs)


def test_an_output_that_would_fail_the_fixture_test_is_kept_under_rejected(tmp_path):
    mapping = Anonymiser()
    garbage = Output(CaptureCommand("lscpu.txt", ("lscpu",), "lscpu"), text="no lscpu prints this\n")
    unmapped = Output(CaptureCommand("gpu-census.txt", ("dcgmi",), "dcgm_discovery"), text="1 GPU found.\n")

    bad = write_output(tmp_path, garbage, mapping)
    no_rule = write_output(tmp_path, unmapped, mapping)

    assert bad.status == capture.REJECTED_STATUS and bad.reason.startswith("parse error: line 1: ")
    assert bad.path == tmp_path / "rejected" / "lscpu.txt" and bad.path.read_text() == "no lscpu prints this\n"
    assert no_rule.reason.startswith("no rule in apps/parsers/registry.py FIXTURE_RULES maps gpu-census.txt")
    assert not (tmp_path / "lscpu.txt").exists()


# --- manage.py capture_node, on this host --------------------------------------------------------------------------


def test_capture_node_writes_parseable_cpu_and_network_files_and_a_readme(tmp_path):
    outdir = tmp_path / "this-node"
    out = io.StringIO()

    call_command("capture_node", str(outdir), stdout=out)

    lines = out.getvalue().splitlines()
    # A minimal image has no iproute2: the capture says so and has no interfaces to run ethtool on.
    has_ip = shutil.which("ip") is not None
    for name in CPU_AND_NETWORK_FILES:
        path = outdir / name
        if name.startswith("ip-") and not has_ip:
            assert any(line.startswith(f"skipped   {name} ") and line.endswith("ip is not installed") for line in lines)
            continue
        assert any(line.startswith(f"written   {name} ") for line in lines), name
        text = read_input(path)
        assert fixture_problem(path, text, registry.tool_for_fixture(path)) is None
    if has_ip:
        interfaces = capture.interfaces_from_ip_link(read_input(outdir / "ip-j-link.json"))
        assert "lo" not in interfaces
        for name in interfaces:  # ethtool ran on every interface but lo; whether it answered depends on the NIC
            assert any(f"ethtool-{name}.txt " in line for line in lines)
    readme = (outdir / "README.md").read_text()
    assert "| lscpu.json | `lscpu -J` |" in readme and "## Anonymisation" in readme
    if not HAS_NVIDIA_SMI:
        skipped = [line for line in lines if line.startswith("skipped   nvidia-smi-q.txt")]
        assert skipped and skipped[0].endswith("nvidia-smi is not installed")
        assert "| `nvidia-smi -q` | nvidia-smi is not installed |" in readme
        assert not (outdir / "nvidia-smi-q.txt").exists()


def test_capture_node_refuses_a_folder_that_is_not_empty(tmp_path):
    (tmp_path / "notes.txt").write_text("keep me")

    with pytest.raises(CommandError, match="exists and is not empty"):
        call_command("capture_node", str(tmp_path), stdout=io.StringIO())

    assert [path.name for path in tmp_path.iterdir()] == ["notes.txt"]


def test_capture_node_refuses_an_interface_name_before_running_anything(tmp_path):
    with pytest.raises(CommandError, match="not a Linux interface name: 'eth0;reboot'"):
        call_command("capture_node", str(tmp_path / "x"), "--interfaces", "eth0;reboot", stdout=io.StringIO())

    assert not (tmp_path / "x").exists()


# --- manage.py discover ----------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(HAS_NVIDIA_SMI, reason="this host has nvidia-smi")
def test_discover_local_without_gpus_exits_1_and_says_why(fast_jobs):
    out = io.StringIO()

    with pytest.raises(CommandError, match="the discovery job ended failed") as raised:
        call_command("discover", "--local", "--hostname", "probe-host", stdout=out)

    assert raised.value.returncode == 1
    printed = out.getvalue()
    assert "added probe-host to the inventory" in printed
    gpu_cells = [line for line in printed.splitlines() if line.startswith("  probe-host  gpus ")]
    assert gpu_cells and "error" in gpu_cells[0]
    assert "could not run: nvidia-smi is not installed" in gpu_cells[0]
    assert "could not run on probe-host: gpus: nvidia-smi is not installed" in printed
    assert "job failed" in printed


@pytest.mark.django_db(transaction=True)
def test_discover_a_simulated_demo_node_exits_0(demo_cluster, simulator, fast_jobs):
    out = io.StringIO()

    call_command("discover", "--node", "gpu016", "--transport", "sim", stdout=out)

    printed = out.getvalue()
    assert "discover gpu016 over sim" in printed
    assert any(line.startswith("  gpu016  gpus ") and "8 GPUs: NVIDIA H200" in line for line in printed.splitlines())
    assert "differences from the inventory: 0" in printed
    assert printed.rstrip().endswith("job succeeded: all steps succeeded")


@pytest.mark.django_db
def test_discover_names_an_unknown_node_and_points_at_load_demo():
    with pytest.raises(CommandError, match="no node 'nope' in the inventory .*load_demo"):
        call_command("discover", "--node", "nope", "--transport", "sim", stdout=io.StringIO())
