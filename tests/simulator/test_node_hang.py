"""The node_hang fault: the OS hung, so the node answers nothing over SSH (the client's connection times out, exit
255, as OpenSSH prints it) while its BMC still answers (power on, the watchdog's SEL record); only taking the power
away through the BMC (cycle, reset, off then on) clears it, `on` to a chassis already on does not."""

import pytest

from apps.simulator import bmc
from apps.simulator import services as simulator
from apps.simulator.faults.kinds import FAULT_KINDS
from apps.simulator.models import SimFault


@pytest.fixture(autouse=True)
def quick_reboots(settings):
    settings.RACKPILOT_SIM_REBOOT_SECONDS = 0


def test_a_hung_node_answers_nothing_as_ssh_says_of_a_silent_host(gpu_node):
    assert simulator.run_command(node=gpu_node, argv=["hostname"]).exit_code == 0

    simulator.inject_fault(node=gpu_node, kind="node_hang")

    for argv in (["hostname"], ["dmesg", "--time-format", "iso"], ["nvidia-smi"]):
        result = simulator.run_command(node=gpu_node, argv=argv)
        assert (result.exit_code, result.stdout) == (255, "")
        assert result.stderr == "ssh: connect to host gpu001 port 22: Connection timed out\n"
    assert FAULT_KINDS["node_hang"].describe("", {}).startswith("the OS hung")


def test_its_bmc_still_answers_and_logs_the_watchdog(gpu_node):
    simulator.inject_fault(node=gpu_node, kind="node_hang")

    state = bmc.bmc_state(gpu_node)

    assert state.powered_on
    line = bmc.sel_elist(state).splitlines()[-1]
    assert line.startswith("   2 | ") and line.endswith(
        "| Watchdog2 IPMI Watchdog | Timer expired, status only | Asserted"
    ), line
    assert bmc.sel_entry(state.sel[-1])["Severity"] == "Critical"


@pytest.mark.parametrize("actions", [["cycle"], ["reset"], ["off", "on"]])
def test_taking_the_power_away_through_the_bmc_clears_the_hang(gpu_node, actions):
    simulator.inject_fault(node=gpu_node, kind="node_hang")
    before = simulator.node_state(node=gpu_node).boot

    for action in actions:
        bmc.chassis_control(gpu_node, action)

    assert not SimFault.objects.filter(node=gpu_node, kind="node_hang").exists()
    assert simulator.run_command(node=gpu_node, argv=["hostname"]).stdout == "gpu001\n"
    assert simulator.node_state(node=gpu_node).boot != before  # a fresh boot, not a hang forgotten


def test_power_on_to_a_chassis_already_on_leaves_it_hung(gpu_node):
    simulator.inject_fault(node=gpu_node, kind="node_hang")

    bmc.chassis_control(gpu_node, "on")
    bmc.chassis_control(gpu_node, "status")

    assert simulator.run_command(node=gpu_node, argv=["hostname"]).exit_code == 255
