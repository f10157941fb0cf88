"""python manage.py sim fault inject|clear|list and sim exec."""

import io

import pytest
from django.core.management import CommandError, call_command

from apps.core.models import AuditEntry
from apps.simulator.faults.kinds import FAULT_KINDS
from apps.simulator.models import SimFault


def _call(*args) -> str:
    out = io.StringIO()
    call_command("sim", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_inject_list_and_clear(demo_cluster):
    assert _call("fault", "inject", "gpu001", "mtu", "--target", "ens2np0", "--param", "mtu=1400") == (
        "gpu001: MTU 1400 on ens2np0 injected.\n"
    )
    _call("fault", "inject", "gpu002", "straggler")
    assert _call("fault", "list") == (
        "gpu001: MTU 1400 on ens2np0\t(mtu)\ngpu002: a straggler: SM clocks capped at 1095 MHz\t(straggler)\n"
    )
    assert AuditEntry.objects.filter(object_type="simulator.simfault", source="command").count() == 2
    assert _call("fault", "clear", "gpu001", "mtu") == "Cleared 1 fault on gpu001.\n"
    assert _call("fault", "clear", "gpu002") == "Cleared 1 fault on gpu002.\n"
    assert _call("fault", "list") == "No faults.\n"


def test_bad_inject_is_a_command_error(demo_cluster):
    with pytest.raises(CommandError, match="target: gpu001 has no GPU '9'"):
        _call("fault", "inject", "gpu001", "ecc", "--target", "9")
    with pytest.raises(CommandError, match="No node named 'gpu404'"):
        _call("fault", "inject", "gpu404", "ecc")
    assert not SimFault.objects.exists()


def test_exec_prints_what_the_node_answers(demo_cluster, capsys):
    out = io.StringIO()
    call_command("sim", "exec", "gpu003", "--", "nvidia-smi", "-L", stdout=out)
    assert out.getvalue().count("NVIDIA H200 (UUID: GPU-") == 8


def test_exec_exits_with_the_commands_exit_code(demo_cluster):
    _call("fault", "inject", "gpu001", "corrupt_checkpoint")
    with pytest.raises(SystemExit) as exited:
        call_command(
            "sim",
            "exec",
            "gpu001",
            "--",
            "sha256sum",
            "-c",
            "/checkpoints/llm-pretrain/SHA256SUMS",
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )
    assert exited.value.code == 1
    with pytest.raises(SystemExit) as exited:
        call_command("sim", "exec", "gpu001", "--", "frobnicate", stdout=io.StringIO(), stderr=io.StringIO())
    assert exited.value.code == 127


@pytest.mark.parametrize("value", ["²", "١٥٠٠"])
def test_a_parameter_in_other_digits_is_a_command_error(demo_cluster, value):
    with pytest.raises(CommandError, match="give NAME=NUMBER"):
        _call("fault", "inject", "gpu001", "mtu", "--param", f"mtu={value}")
    assert not SimFault.objects.exists()


WORDS = [
    ("mtu", "MTU 1500 on ens1np0"),
    ("pfc_off", "PFC off for priority 3 on every data NIC"),
    ("nvlink_down", "NVLink 17 down on GPU 0"),
    ("xid79", "GPU 0 has fallen off the bus (XID 79)"),
    ("ecc", "1 uncorrectable ECC error on GPU 0 (row remap pending)"),
    ("thermal", "GPU 0 slowed down by heat at 92 °C"),
    ("pcie_downtrained", "PCIe link of GPU 0 downtrained to Gen3 x8"),
    ("nic_down", "ens1np0 link down"),
    ("disk_full", "disk full at /checkpoints"),
    ("corrupt_checkpoint", "corrupt checkpoint /checkpoints/llm-pretrain/step_0005000.pt"),
    ("straggler", "a straggler: SM clocks capped at 1095 MHz"),
    ("ptp_unsynced", "PTP clock not synchronised"),
    ("degraded_cable", "degraded cable on ens1np0: link up at 200 Gb/s"),
    ("late_thermal", "GPU 0 reaches 92 °C and slows down after 600 s under load"),
    ("power_cap", "every GPU power-capped at 450 W"),
    ("dataloader_stall", "the data loader stalls the ranks 35% of every 6 s"),
    ("co_located", "a second trainer shares the node: the job's ranks run at 60% there"),
    ("storage_slow", "the storage behind /checkpoints stopped answering"),
    ("node_hang", "the OS hung: no answer over SSH, the BMC still answers"),
]


@pytest.mark.parametrize(("kind", "said"), WORDS)
def test_each_kind_says_what_was_injected_in_its_own_words(demo_cluster, kind, said):
    assert _call("fault", "inject", "gpu001", kind) == f"gpu001: {said} injected.\n"
    # The audit log names the fault the same way, not by its codes ("gpu001 mtu ens1np0").
    entry = AuditEntry.objects.get(object_type="simulator.simfault", action="create")
    assert entry.object_repr == f"gpu001: {said}"


# The rack-scale kinds, injected on a GB200 NVL72 compute tray.
TRAY_WORDS = [
    ("nvswitch_tray_down", "NVLink switch tray 1 down: every GPU of the domain lost its links to it"),
    ("tray_nvlink_degraded", "every GPU of the tray lost 4 of its NVLink links"),
    ("imex_peer_lost", "IMEX peer nvl01-t01 lost"),
    ("coolant_flow_low", "the rack's coolant flow at 40% of design"),
    ("leak", "coolant leak detected in the tray"),
]


@pytest.fixture
def rack_scale_cluster(db):
    from apps.inventory.demo import ClusterShape, load_cluster

    load_cluster(ClusterShape(compute_nodes=8, rack_scale_racks=1))


def test_each_rack_scale_kind_says_what_was_injected_in_its_own_words(rack_scale_cluster):
    for kind, said in TRAY_WORDS:
        assert _call("fault", "inject", "nvl01-t01", kind) == f"nvl01-t01: {said} injected.\n"
    with pytest.raises(CommandError, match="rack-scale domain"):
        _call("fault", "inject", "gpu001", "leak")


def test_every_fault_kind_has_its_words_tested():
    worded = {kind for kind, _ in WORDS} | {kind for kind, _ in TRAY_WORDS}
    assert worded == set(FAULT_KINDS)
