"""The NICs column: one script reads ethtool, ethtool -i and mlnx_qos of every data NIC; its framed output is split
back into what each tool said, run for real by this host's shell and answered by the simulator in the same form."""

import shutil
import subprocess

import pytest

from apps.discovery.choices import FactFamily
from apps.discovery.facts import nics_summary, read, split_sections
from apps.inventory.models import Node
from apps.nodeexec.catalogue import NIC_FACTS_SCRIPT, CommandError, build
from apps.parsers.errors import ParseError
from apps.simulator import services as sim_services
from tests.parsers.helpers import real


def framed(*sections: tuple[str, str, int, str], absent: tuple[str, ...] = ()) -> str:
    """What the script prints for (tool, interface, exit status, stdout) sections (no stderr)."""
    text = "".join(f"@@rackpilot {tool} {nic}\n{out}@@rackpilot exit {code}\n\n" for tool, nic, code, out in sections)
    return text + "".join(f"@@rackpilot absent {nic}\n" for nic in absent)


def test_every_interface_list_is_one_checked_argv_element():
    argv = build("nic-facts", interfaces="ens1np0,ens2np0")

    assert argv == ["sh", "-c", NIC_FACTS_SCRIPT, "sh", "ens1np0,ens2np0"]
    for hostile in ("ens1np0;reboot", "ens1np0 ens2np0", "$(id)", "*", ",ens1np0", ",".join(["e"] * 17)):
        with pytest.raises(CommandError, match="interfaces"):
            build("nic-facts", interfaces=hostile)


def test_the_script_run_by_this_hosts_shell_splits_into_sections_with_reasons():
    """Real sh, real /sys/class/net: lo exists everywhere, the second name nowhere; mlnx_qos is not on this host."""
    result = subprocess.run(
        build("nic-facts", interfaces="lo,nosuch0"), capture_output=True, text=True, timeout=30, check=False
    )

    assert result.returncode == 0
    sections, absent = split_sections(result.stdout)
    assert absent == ["nosuch0"]
    assert [(s.tool, s.interface) for s in sections] == [("ethtool", "lo"), ("ethtool-i", "lo"), ("mlnx_qos", "lo")]
    facts = read("nics", result.stdout).facts
    if shutil.which("mlnx_qos") is None:
        assert facts["could_not_run"]["qos:lo"] == "mlnx_qos is not installed (not found on the node)"
    if shutil.which("ethtool") is None:
        assert facts["could_not_run"]["speed:lo"] == "ethtool is not installed (not found on the node)"
    else:  # the loopback has no driver information, but ethtool lo prints its settings
        assert facts["interfaces"]["lo"][FactFamily.SPEED]["link_detected"] is True
        assert "nic-fw:lo" in facts["could_not_run"]


def test_the_simulator_answers_the_script_with_its_own_tools_output(demo_cluster):
    gpu_node = Node.objects.get(hostname="gpu001")

    def run(*argv):
        return sim_services.run_command(node=gpu_node, argv=list(argv), seed=0)

    sim_services.inject_fault(node=gpu_node, kind="nic_down", target="ens2np0")

    output = run(*build("nic-facts", interfaces="ens1np0,ens2np0,nosuch0"))

    assert output.exit_code == 0 and output.stderr == ""
    sections, absent = split_sections(output.stdout)
    assert absent == ["nosuch0"]
    by_tool = {(s.tool, s.interface): "\n".join(s.stdout) + "\n" for s in sections}
    assert by_tool[("ethtool", "ens1np0")] == run("ethtool", "ens1np0").stdout
    assert by_tool[("ethtool-i", "ens2np0")] == run("ethtool", "-i", "ens2np0").stdout
    assert by_tool[("mlnx_qos", "ens1np0")] == run("mlnx_qos", "-i", "ens1np0").stdout
    facts = read("nics", output.stdout).facts
    assert facts["could_not_run"] == {}
    assert facts["interfaces"]["ens2np0"][FactFamily.SPEED]["link_detected"] is False
    assert nics_summary(facts) == (
        "2 NICs; 400 Gb/s ×1, no link ×1; firmware 28.41.1000 (MT_0000000838); PFC 3; not on this node: nosuch0"
    )


def test_a_failed_or_unreadable_tool_is_a_reason_and_the_others_are_still_read():
    text = framed(
        ("ethtool", "eth0", 0, real("network/ethtool-eth0-1GbE-node_exporter-fixture.txt")),
        ("ethtool-i", "eth0", 0, "not what ethtool -i prints\n"),
        ("mlnx_qos", "eth0", 127, ""),
    ).replace("@@rackpilot exit 127\n\n", "@@rackpilot exit 127\nsh: 9: mlnx_qos: not found\n")

    facts = read("nics", text).facts

    assert set(facts["interfaces"]["eth0"]) == {FactFamily.SPEED}
    assert facts["could_not_run"]["qos:eth0"] == "mlnx_qos is not installed (not found on the node)"
    assert facts["could_not_run"]["nic-fw:eth0"].startswith("ethtool -i output not understood (line 1:")
    assert nics_summary(facts).startswith("could not run: ethtool -i output not understood")


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("", 1, "got nothing"),
        ("Settings for eth0:\n", 1, "first"),
        ("@@rackpilot ethtool eth0\nSettings for eth0:\n", 2, "truncated"),
        ("@@rackpilot ethtool eth0\n@@rackpilot ethtool-i eth0\n", 2, "exit N"),
        ("@@rackpilot ethtool eth0\n@@rackpilot exit x\n", 2, "exit status"),
        ("@@rackpilot reboot eth0\n", 1, "expected"),
    ],
)
def test_broken_framing_is_a_parse_error_naming_the_line(text, line, fragment):
    with pytest.raises(ParseError) as caught:
        split_sections(text)

    assert caught.value.line == line and fragment in caught.value.message


def test_output_without_a_final_newline_is_kept_apart_from_the_next_mark():
    sections, _ = split_sections("@@rackpilot ethtool-i eth0\ndriver: mlx5_core@@rackpilot exit 0\n\n")

    assert sections[0].stdout == ["driver: mlx5_core"] and sections[0].exit_code == 0
