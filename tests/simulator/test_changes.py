"""Commands that change a simulated node (deployments' apply steps): what they print, and that the change persists."""

import base64
import io
import json
import re

import pytest
from django.core.management import call_command

from apps.nodeexec.catalogue import PYTHON_VERSIONS_SCRIPT, WRITE_FILE_SCRIPT
from apps.parsers.nccl_log import parse_nccl_log, socket_ifname_selects
from apps.parsers.nccl_tests import parse_nccl_tests
from apps.parsers.network import parse_ip_link, parse_mlnx_qos
from apps.simulator import services
from apps.simulator.models import SimChange

APT = ("apt-get", "install", "-y", "--allow-downgrades", "--allow-change-held-packages")
FWUPD = ("fwupdmgr", "install", "--no-reboot-check", "--assume-yes")
NCCL_RUN = ("all_reduce_perf", "-b", "8", "-e", "64", "-f", "2", "-g", "8")
# Read after every kind of change; forgetting the changes must give these back byte for byte.
WATCHED = [
    ("nvidia-smi",),
    ("nvidia-smi", "-q"),
    ("nvidia-smi", "-q", "-x"),
    ("nvidia-smi", "--query-gpu=driver_version,vbios_version", "--format=csv"),
    ("ip", "-j", "link"),
    ("ethtool", "-i", "ens1np0"),
    ("ethtool", "-l", "ens1np0"),
    ("mlnx_qos", "-i", "ens1np0"),
    ("cat", "/sys/class/net/ens1np0/ecn/roce_np/enable/3"),
    ("cat", "/sys/class/dmi/id/bios_version"),
    ("cat", "/etc/nccl.conf"),
    ("ipmitool", "mc", "info"),
    ("dmesg",),
    ("dpkg-query", "-W", "-f=${Version}", "libnccl2"),
    ("nvcc", "--version"),
    ("mpirun", "--version"),
    ("python3", "-c", PYTHON_VERSIONS_SCRIPT),
    NCCL_RUN,
    ("nvbandwidth",),
    ("dcgmi", "diag", "-r", "1"),
]


def write_file(run, path: str, content: str):
    return run("sh", "-c", WRITE_FILE_SCRIPT, "sh", base64.b64encode(content.encode()).decode(), path)


def mtus(run) -> dict[str, int]:
    return {name: link.mtu for name, link in parse_ip_link(run("ip", "-j", "link").stdout).by_name().items()}


# --- ip link set, ethtool -L, mlnx_qos, ECN -----------------------------------------------------------------------


def test_ip_link_set_mtu_persists_and_repairs_an_mtu_fault(gpu_node, run):
    services.inject_fault(node=gpu_node, kind="mtu", target="ens1np0")
    assert mtus(run)["ens1np0"] == 1500
    result = run("sudo", "ip", "link", "set", "dev", "ens1np0", "mtu", "9000")
    assert result.as_tuple() == (0, "", "")
    assert mtus(run)["ens1np0"] == 9000
    assert "mtu 9000" in run("ip", "link", "show", "ens1np0").stdout
    assert run("cat", "/sys/class/net/ens1np0/mtu").stdout == "9000\n"
    services.clear_faults(node=gpu_node)
    services.inject_fault(node=gpu_node, kind="mtu", target="ens1np0")  # a fault after the apply takes effect again
    assert mtus(run)["ens1np0"] == 1500
    assert not SimChange.objects.filter(key="nic:ens1np0:mtu").exists()


def test_ip_link_set_errors(run):
    assert run("ip", "link", "set", "dev", "eth9", "mtu", "9000").as_tuple() == (1, "", 'Cannot find device "eth9"\n')
    too_big = run("ip", "link", "set", "dev", "ens1np0", "mtu", "9300")
    assert too_big.as_tuple() == (2, "", "Error: mtu greater than device maximum.\n")
    assert run("ip", "link", "set", "dev", "ens1np0", "mtu", "20").exit_code == 2
    assert not SimChange.objects.exists()


def test_ethtool_channels_show_and_set(run):
    shown = run("ethtool", "-l", "ens1np0")
    assert shown.stdout == (
        "Channel parameters for ens1np0:\nPre-set maximums:\nRX:\t\tn/a\nTX:\t\tn/a\nOther:\t\tn/a\nCombined:\t63\n"
        "Current hardware settings:\nRX:\t\tn/a\nTX:\t\tn/a\nOther:\t\tn/a\nCombined:\t63\n"
    )
    assert run("ethtool", "-L", "ens1np0", "combined", "16").as_tuple() == (0, "", "")
    assert run("ethtool", "-l", "ens1np0").stdout.endswith(
        "Current hardware settings:\nRX:\t\tn/a\nTX:\t\tn/a\nOther:\t\tn/a\nCombined:\t16\n"
    )
    refused = run("ethtool", "-L", "ens1np0", "combined", "64")
    assert refused.as_tuple() == (1, "", "Cannot set device channel parameters: Invalid argument\n")
    assert SimChange.objects.get(key="nic:ens1np0:channels").value == 16


def test_mlnx_qos_sets_trust_and_pfc_and_prints_the_result(gpu_node, run):
    services.inject_fault(node=gpu_node, kind="pfc_off", target="3")
    assert parse_mlnx_qos(run("mlnx_qos", "-i", "ens1np0").stdout).pfc_priorities == []
    result = run("mlnx_qos", "-i", "ens1np0", "--trust", "pcp", "--pfc", "0,0,0,1,1,0,0,0")
    assert result.exit_code == 0
    assert "Priority trust state: pcp" in result.stdout and "dscp2prio" not in result.stdout
    assert parse_mlnx_qos(result.stdout).pfc_priorities == [3, 4]
    assert result.stdout == run("mlnx_qos", "-i", "ens1np0").stdout  # the same renderer, now persisted
    back = run("mlnx_qos", "-i", "ens1np0", "--trust", "dscp", "--pfc", "0,0,0,1,0,0,0,0").stdout
    assert "Priority trust state: dscp" in back and parse_mlnx_qos(back).pfc_priorities == [3]
    services.inject_fault(node=gpu_node, kind="pfc_off", target="4")  # overrides every stored PFC setting
    assert parse_mlnx_qos(run("mlnx_qos", "-i", "ens1np0").stdout).pfc_priorities == []


@pytest.mark.parametrize("flags", ["0,0,0,1", "0,0,0,2,0,0,0,0", "yes"])
def test_mlnx_qos_bad_pfc_changes_nothing(run, flags):
    result = run("mlnx_qos", "-i", "ens1np0", "--trust", "dscp", "--pfc", flags)
    assert result.exit_code == 1 and "Invalid pfc" in result.stderr
    assert not SimChange.objects.exists()


def test_ecn_written_through_sysfs(run):
    path = "/sys/class/net/ens2np0/ecn/roce_np/enable/3"
    assert run("cat", path).stdout == "1\n"
    assert write_file(run, path, "0").as_tuple() == (0, "", "")
    assert run("cat", path).stdout == "0\n"
    assert run("cat", "/sys/class/net/ens2np0/ecn/roce_rp/enable/3").stdout == "0\n"
    assert SimChange.objects.get().key == "nic:ens2np0:ecn"
    assert write_file(run, "/sys/class/net/ens2np0/ecn/roce_rp/enable/3", "1").exit_code == 0
    assert run("cat", path).stdout == "1\n"


# --- chronyc, ipmitool -----------------------------------------------------------------------------------------


def test_chronyc_tracking_synchronised_to_the_phc(run):
    lines = run("chronyc", "tracking").stdout.splitlines()
    keys = [line.split(":")[0].rstrip() for line in lines]
    assert keys == [
        "Reference ID",
        "Stratum",
        "Ref time (UTC)",
        "System time",
        "Last offset",
        "RMS offset",
        "Frequency",
        "Residual freq",
        "Skew",
        "Root delay",
        "Root dispersion",
        "Update interval",
        "Leap status",
    ]
    assert lines[0] == "Reference ID    : 50484330 (PHC0)"
    offset = float(lines[3].split(": ")[1].split()[0])
    assert offset < 1e-6 and lines[-1] == "Leap status     : Normal"


def test_ptp_unsynced_fault(gpu_node, run):
    healthy = run("chronyc", "tracking").stdout
    fault = services.inject_fault(node=gpu_node, kind="ptp_unsynced")
    lines = run("chronyc", "tracking").stdout.splitlines()
    assert lines[0] == "Reference ID    : 00000000 ()" and lines[1] == "Stratum         : 0"
    assert lines[-1] == "Leap status     : Not synchronised"
    assert float(lines[3].split(": ")[1].split()[0]) > 0.1
    services.clear_fault(fault=fault)
    assert run("chronyc", "tracking").stdout == healthy


def test_ipmitool_mc_info_follows_bmc_firmware(run):
    before = run("ipmitool", "mc", "info").stdout
    assert before.startswith("Device ID                 : 32\n")
    assert "IPMI Version              : 2.0\n" in before and "Manufacturer Name         : Supermicro\n" in before
    assert "Product ID                : " in before
    assert run(*FWUPD, "/var/lib/rackpilot/firmware/bmc/1.99.0.cab").exit_code == 0
    assert "Firmware Revision         : 1.99.0\n" in run("ipmitool", "mc", "info").stdout


# --- fwupdmgr -------------------------------------------------------------------------------------------------


def test_fwupdmgr_installs_each_component(run):
    for component, version in [("bios", "2.4.1"), ("gpu_vbios", "96.00.CF.00.01"), ("nic_firmware", "28.43.2026")]:
        result = run(*FWUPD, f"/var/lib/rackpilot/firmware/{component}/{version}.cab")
        assert result.exit_code == 0 and result.stdout.endswith("Successfully installed firmware\n")
    assert run("cat", "/sys/class/dmi/id/bios_version").stdout == "2.4.1\n"
    query = run("nvidia-smi", "--query-gpu=vbios_version", "--format=csv,noheader").stdout
    assert query == "96.00.CF.00.01\n" * 8
    assert "96.00.CF.00.01" in run("nvidia-smi", "-q").stdout
    assert "<vbios_version>96.00.CF.00.01</vbios_version>" in run("nvidia-smi", "-q", "-x").stdout
    assert "firmware-version: 28.43.2026 (MT_0000000838)" in run("ethtool", "-i", "ens1np0").stdout


@pytest.mark.parametrize(
    "path",
    ["/var/lib/rackpilot/firmware/cpld/1.0.cab", "/tmp/bios/1.0.cab", "/var/lib/rackpilot/firmware/bios/1.0.zip"],
)
def test_fwupdmgr_refuses_what_it_cannot_install(run, path):
    result = run(*FWUPD, path)
    assert result.exit_code == 1 and result.stderr
    assert not SimChange.objects.exists()


# --- apt-get, dpkg-query, nvcc, mpirun -------------------------------------------------------------------------


def test_healthy_package_versions(run):
    assert run("dpkg-query", "-W", "-f=${Version}", "libnccl2").as_tuple() == (0, "2.28.3-1+cuda13.0", "")
    assert run("dpkg-query", "-W", "-f=${Version}", "libnccl-dev").stdout == "2.28.3-1+cuda13.0"
    assert run("dpkg-query", "-W", "-f=${Version}", "openmpi-bin").stdout == "4.1.6-1"
    assert run("dpkg-query", "-W", "-f=${Version}", "cuda-drivers").stdout == "580.159.04-1"
    missing = run("dpkg-query", "-W", "-f=${Version}", "libfoo")
    assert missing.as_tuple() == (1, "", "dpkg-query: no packages found matching libfoo\n")
    assert run("nvcc", "--version").stdout.splitlines()[3] == "Cuda compilation tools, release 13.0, V13.0.88"
    assert len(run("/usr/local/cuda/bin/nvcc", "--version").stdout.splitlines()) == 5
    assert run("mpirun", "--version").stdout == (
        "mpirun (Open MPI) 4.1.6\n\nReport bugs to https://www.open-mpi.org/community/help/\n"
    )


def test_apt_get_installs_and_everything_follows(run):
    result = run(
        *APT,
        "cuda-drivers=570.172.08-1",
        "cuda-toolkit-12-8",
        "libnccl2=2.26.2-1+cuda12.8",
        "libnccl-dev=2.26.2-1+cuda12.8",
        "openmpi-bin=4.1.5-1",
    )
    assert result.exit_code == 0
    assert result.stdout.startswith("Reading package lists...\n")
    assert "Setting up libnccl2 (2.26.2-1+cuda12.8) ...\n" in result.stdout
    assert run("dpkg-query", "-W", "-f=${Version}", "libnccl2").stdout == "2.26.2-1+cuda12.8"
    assert run("dpkg-query", "-W", "-f=${Version}", "cuda-drivers").stdout == "570.172.08-1"
    assert run("dpkg-query", "-W", "-f=${Version}", "openmpi-bin").stdout == "4.1.5-1"
    assert "release 12.8, V12.8.93" in run("nvcc", "--version").stdout
    assert run("mpirun", "--version").stdout.startswith("mpirun (Open MPI) 4.1.5\n")
    table = run("nvidia-smi").stdout.splitlines()[2]
    assert "Driver Version: 570.172.08" in table and "CUDA Version: 12.8" in table
    assert re.search(r"^Driver Version +: 570\.172\.08$", run("nvidia-smi", "-q").stdout, re.MULTILINE)
    xml = run("nvidia-smi", "-q", "-x").stdout
    assert "<driver_version>570.172.08</driver_version>" in xml and "<cuda_version>12.8</cuda_version>" in xml
    query = run("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader").stdout
    assert query == "570.172.08\n" * 8
    assert "NVIDIA UNIX Open Kernel Module for x86_64  570.172.08" in run("dmesg").stdout
    assert "570.172.08" in run("cat", "/proc/driver/nvidia/version").stdout
    assert "Driver Version: 570.172.08" in run("nvbandwidth").stdout
    assert "570.172.08" in run("dcgmi", "diag", "-r", "1").stdout
    nccl = run(*NCCL_RUN).stdout
    assert nccl.startswith("# nccl-tests version 2.19.6 nccl-headers=22602 nccl-library=22602\n")
    debug = run("env", "NCCL_DEBUG=INFO", *NCCL_RUN).stdout
    assert parse_nccl_log(debug).nccl_version == "2.26.2"
    assert "NCCL INFO NCCL version 2.26.2+cuda12.8" in debug


@pytest.mark.parametrize(
    ("driver", "cuda"), [("550.163.01", "12.4"), ("560.35.05", "12.6"), ("575.64.05", "12.9"), ("580.95.05", "13.0")]
)
def test_nvidia_smi_cuda_version_follows_the_driver_branch(run, driver, cuda):
    assert run(*APT, f"cuda-drivers={driver}-1").exit_code == 0
    assert f"CUDA Version: {cuda} " in run("nvidia-smi").stdout.splitlines()[2]


def test_apt_get_is_all_or_nothing(run):
    result = run(*APT, "libnccl2=2.26.2-1+cuda12.8", "libfoo=1.0-1")
    assert result.exit_code == 100 and result.stderr == "E: Unable to locate package libfoo\n"
    assert "Setting up" not in result.stdout
    assert not SimChange.objects.exists()
    assert run("dpkg-query", "-W", "-f=${Version}", "libnccl2").stdout == "2.28.3-1+cuda13.0"


# --- python3 -----------------------------------------------------------------------------------------------------


def test_python_packages_missing_then_installed(run):
    assert run("python3", "-c", PYTHON_VERSIONS_SCRIPT).as_tuple() == (0, "torch missing\ntensorflow missing\n", "")
    result = run("python3", "-m", "pip", "install", "--no-input", "torch==2.7.1", "tensorflow==2.19.0")
    assert result.exit_code == 0
    assert result.stdout.endswith("Successfully installed torch-2.7.1 tensorflow-2.19.0\n")
    assert run("python3", "-c", PYTHON_VERSIONS_SCRIPT).stdout == "torch 2.7.1\ntensorflow 2.19.0\n"


def test_python_refuses_other_scripts_and_packages(run):
    other = run("python3", "-c", "import os; os.system('rm -rf /')")
    assert other.exit_code == 1 and other.stderr.startswith("Traceback (most recent call last):\n")
    refused = run("python3", "-m", "pip", "install", "--no-input", "torch==2.7.1", "jax==0.4.30")
    assert refused.exit_code == 1
    assert "ERROR: No matching distribution found for jax==0.4.30" in refused.stderr
    assert not SimChange.objects.exists()


# --- write-file, cat, sh, systemctl ---------------------------------------------------------------------------


def test_write_file_and_cat_round_trip(run):
    content = "[Unit]\nDescription=rackpilot test\n\n# unicode: ✓\n"
    assert write_file(run, "/etc/systemd/system/rackpilot.slice", content).as_tuple() == (0, "", "")
    assert run("cat", "/etc/systemd/system/rackpilot.slice").stdout == content
    assert run("cat", "/etc/missing.conf").as_tuple() == (1, "", "cat: /etc/missing.conf: No such file or directory\n")
    assert run("systemctl", "daemon-reload").as_tuple() == (0, "", "")
    assert run("systemctl", "show", "-p", "ActiveState", "rackpilot.slice").stdout == "ActiveState=active\n"


def test_hostile_values_are_just_data(gpu_node, run):
    path = "/tmp/x;rm -rf /"
    content = "$(reboot)\n`halt`\n'; DROP TABLE simulator_simchange; --\n"
    assert write_file(run, path, content).exit_code == 0
    assert run("cat", path).stdout == content
    assert SimChange.objects.get(node=gpu_node).key == f"file:{path}"
    assert run("hostname").stdout == "gpu001\n"
    assert write_file(run, "/" + "a" * 300, "x").exit_code == 2  # a name too long is refused, not truncated
    bad = run("sh", "-c", WRITE_FILE_SCRIPT, "sh", "not base64!", "/etc/x")
    assert bad.as_tuple() == (1, "", "base64: invalid input\n")


def test_only_the_write_file_script_runs(run):
    result = run("sh", "-c", "rm -rf /", "sh")
    assert result.as_tuple() == (2, "", "sh: simulated nodes run only catalogue scripts\n")


# --- NCCL settings ---------------------------------------------------------------------------------------------


def test_nccl_without_a_matching_interface_fails_like_nccl(run):
    result = run("env", "NCCL_SOCKET_IFNAME==eth0", "NCCL_DEBUG=WARN", *NCCL_RUN)
    assert result.exit_code != 0
    lines = result.stdout.splitlines()
    assert lines[-3].endswith("[0] NCCL WARN Bootstrap : no socket interface found")
    assert lines[-2] == (
        "gpu001: Test NCCL failure common.cu:1046 'internal error - please report this issue to the NCCL developers / '"
    )
    assert lines[-1].startswith(" .. gpu001 pid ") and lines[-1].endswith(": Test failure common.cu:1454")
    parsed = parse_nccl_tests(result.stdout)
    assert parsed.status == "failed" and parsed.rows == []
    warnings = parse_nccl_log(result.stdout).warnings
    assert [warning.category for warning in warnings] == ["bootstrap"]


def test_nccl_conf_is_read_and_env_wins(run):
    write_file(run, "/etc/nccl.conf", "NCCL_SOCKET_IFNAME=^ens,eno,lo\nNCCL_DEBUG=INFO\n")
    failed = run(*NCCL_RUN)
    assert failed.exit_code == 3 and "NCCL WARN Bootstrap : no socket interface found" in failed.stdout
    assert "NCCL INFO NCCL_SOCKET_IFNAME set by environment to ^ens,eno,lo" in failed.stdout
    result = run("env", "NCCL_SOCKET_IFNAME=ens2", *NCCL_RUN)
    assert result.exit_code == 0
    assert "NCCL INFO NCCL_SOCKET_IFNAME set by environment to ens2\n" in result.stdout
    log = parse_nccl_log(result.stdout)
    assert [(interface.role, interface.name) for interface in log.interfaces] == [("socket", "ens2np0")]
    assert parse_nccl_tests(result.stdout).status == "completed"


@pytest.mark.parametrize(
    ("ifname", "works"),
    [
        ("ens", True),
        ("=ens1np0", True),
        ("=ens1", False),
        ("^ens,lo", True),
        ("^ens,eno,lo", False),
        ("^docker", True),
        ("eth", False),
    ],
)
def test_nccl_socket_ifname_semantics(run, ifname, works):
    result = run("env", f"NCCL_SOCKET_IFNAME={ifname}", *NCCL_RUN)
    assert (result.exit_code == 0) is works


@pytest.mark.parametrize("ifname", ["ens", "ens3", "=ens2np0", "^lo,eno", "^=lo,eno1,ens1np0", "en,lo:5000", "^docker"])
def test_the_interface_nccl_uses_is_the_one_the_parser_reads_the_setting_to_select(run, ifname):
    names = [link.name for link in parse_ip_link(run("ip", "-j", "link").stdout).links]
    log = parse_nccl_log(run("env", f"NCCL_SOCKET_IFNAME={ifname}", "NCCL_DEBUG=INFO", *NCCL_RUN).stdout)
    used = [interface.name for interface in log.interfaces if interface.role == "socket"]
    assert used == socket_ifname_selects(ifname, names)[:1]


def test_multi_node_nccl_tests_honour_env(demo_cluster):
    from apps.inventory.models import Node

    nodes = list(Node.objects.filter(hostname__in=["gpu001", "gpu002"]).order_by("hostname"))
    ok = services.run_nccl_tests(nodes=nodes, max_bytes="1M", env={"NCCL_SOCKET_IFNAME": "ens"})
    assert ok.exit_code == 0
    failed = services.run_nccl_tests(nodes=nodes, max_bytes="1M", env={"NCCL_SOCKET_IFNAME": "=ib0"})
    assert failed.exit_code == 3 and "internal error" in failed.stdout


# --- forgetting changes -------------------------------------------------------------------------------------------


def _apply_everything(run) -> None:
    steps = [
        ("ip", "link", "set", "dev", "ens1np0", "mtu", "4200"),
        ("ethtool", "-L", "ens1np0", "combined", "8"),
        ("mlnx_qos", "-i", "ens1np0", "--trust", "pcp", "--pfc", "0,0,0,0,1,0,0,0"),
        (*FWUPD, "/var/lib/rackpilot/firmware/bios/9.9.9.cab"),
        (*FWUPD, "/var/lib/rackpilot/firmware/bmc/9.9.9.cab"),
        (*FWUPD, "/var/lib/rackpilot/firmware/gpu_vbios/96.00.FF.00.01.cab"),
        (*FWUPD, "/var/lib/rackpilot/firmware/nic_firmware/28.99.9999.cab"),
        (*APT, "cuda-drivers=570.172.08-1", "cuda-toolkit-12-8", "libnccl2=2.26.2-1+cuda12.8", "openmpi-bin=5.0.7-1"),
        ("python3", "-m", "pip", "install", "--no-input", "torch==2.7.1"),
    ]
    for argv in steps:
        assert run(*argv).exit_code == 0, argv
    assert write_file(run, "/sys/class/net/ens1np0/ecn/roce_np/enable/3", "0").exit_code == 0
    assert write_file(run, "/etc/nccl.conf", "NCCL_DEBUG=INFO\n").exit_code == 0


def test_forgetting_changes_restores_the_healthy_output_exactly(gpu_node, run):
    before = {argv: run(*argv) for argv in WATCHED}
    _apply_everything(run)
    during = {argv: run(*argv) for argv in WATCHED}
    assert [argv for argv in WATCHED if during[argv] == before[argv]] == []
    assert services.clear_changes(node=gpu_node) == 15
    assert {argv: run(*argv) for argv in WATCHED} == before


def test_changes_stay_on_their_node(demo_cluster, run):
    from apps.inventory.models import Node

    run("ip", "link", "set", "dev", "ens1np0", "mtu", "4200")
    other = Node.objects.get(hostname="gpu002")
    assert mtus(run)["ens1np0"] == 4200
    links = parse_ip_link(run("ip", "-j", "link", node=other).stdout).by_name()
    assert links["ens1np0"].mtu == 9000


def test_sim_reset_command_forgets_changes(gpu_node, run):
    run("ip", "link", "set", "dev", "ens1np0", "mtu", "4200")
    out = io.StringIO()
    call_command("sim", "reset", "gpu001", stdout=out)
    assert out.getvalue().strip() == "Forgot 1 change on gpu001."
    assert mtus(run)["ens1np0"] == 9000


def test_page_lists_changes_and_operators_forget_them(browser_as, viewer, operator, gpu_node, run):
    write_file(run, "/etc/nccl.conf", "NCCL_DEBUG=INFO\n")
    # A structured change (an SEL record a fault left) in words, not Python's repr of a dict (the demo showed one).
    SimChange.objects.create(node=gpu_node, key="sel:000002", value={"sensor_type": "Critical Interrupt", "id": 2})
    html = browser_as(viewer).get("/simulator/").content.decode()
    assert "file:/etc/nccl.conf" in html and "Forget changes" not in html
    assert re.search(r"(id: 2; sensor_type: Critical Interrupt|sensor_type: Critical Interrupt; id: 2)</td>", html)
    assert "{&#x27;" not in html  # no Python repr
    assert browser_as(viewer).post("/simulator/nodes/gpu001/forget/").status_code == 403
    client = browser_as(operator)
    assert "Forget changes" in client.get("/simulator/").content.decode()
    assert client.post("/simulator/nodes/gpu001/forget/").status_code == 302
    assert not SimChange.objects.exists()
    assert "Forgot 2 changes on gpu001." in client.get("/simulator/").content.decode()


def test_ptp_unsynced_is_offered_everywhere(browser_as, operator, gpu_node, api_as):
    html = browser_as(operator).get("/simulator/").content.decode()
    assert "ptp_unsynced" in html
    out = io.StringIO()
    call_command("sim", "fault", "inject", "gpu001", "ptp_unsynced", stdout=out)
    call_command("sim", "fault", "list", "--json", stdout=out)
    assert '"kind": "ptp_unsynced"' in out.getvalue()
    assert json.loads(out.getvalue().split("\n", 1)[1])[0]["target"] == ""


def test_numbers_in_other_digits_are_refused_as_the_real_tools_refuse_them(run):
    # iproute2 and ethtool read numbers with strtoul: only ASCII digits, so "٩٠٠٠" is not 9000 and "²" not 2.
    arabic = run("ip", "link", "set", "dev", "ens1np0", "mtu", "٩٠٠٠")
    assert arabic.as_tuple() == (255, "", 'Error: argument "٩٠٠٠" is wrong: Invalid "mtu" value\n\n')
    superscript = run("ethtool", "-L", "ens1np0", "combined", "²")
    assert superscript.as_tuple() == (1, "", 'ethtool: bad command line argument(s)\nethtool: invalid value "²"\n')
    assert run("nvidia-smi", "dmon", "-c", "²").exit_code == 2
    assert run("all_reduce_perf", "-g", "٣").exit_code != 0
    assert not SimChange.objects.exists()
