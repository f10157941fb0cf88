"""The simulated Slurm controller answers sinfo and scontrol as Slurm 22.05 does (checked against Debian's slurmctld
in test_real_slurmctld.py): its output is judged by the real parsers, the same ones that read the real controller."""

from types import SimpleNamespace

import pytest

from apps.parsers.slurm import parse_show_nodes, parse_sinfo_nodes
from apps.simulator.shell import run as sim_run
from apps.simulator.terminal import ClusterHost, Context
from apps.simulator.tools import slurmctld

pytestmark = pytest.mark.django_db  # the controller lists the cluster's Slurm training runs (none here)

SINFO = ["sinfo", "-N", "-h", "-o", "%N|%T|%H|%u|%E"]
AT = 1_780_000_000.0  # the controller's clock, set by the test


@pytest.fixture
def controller(monkeypatch):
    monkeypatch.setattr(slurmctld, "_now", lambda: AT)
    hosts = [ClusterHost(f"gpu00{number}", 112, 8, 2_048_000) for number in (1, 2, 3)]
    return Context(state=SimpleNamespace(slurm_nodes={}), hostname="mgmt01", cluster=lambda: hosts)


def run(context, *argv):
    return sim_run(context, list(argv))


def test_a_drain_shows_in_sinfo_and_scontrol_with_its_reason_and_stamp(controller):
    assert run(controller, "scontrol", "update", "NodeName=gpu002", "State=DRAIN", "Reason=xid 79 | GPU 3").stdout == ""
    listed = parse_sinfo_nodes(run(controller, *SINFO).stdout).by_name()
    assert listed["gpu002"].drain_state == "DRAINED" and listed["gpu002"].reason == "xid 79 | GPU 3"
    assert listed["gpu002"].reason_user == "root" and listed["gpu002"].reason_time == slurmctld._stamp(AT)
    assert not listed["gpu001"].drained and listed["gpu001"].state == "IDLE"
    (shown,) = parse_show_nodes(run(controller, "scontrol", "show", "node", "-o", "gpu002").stdout).nodes
    assert (shown.state, shown.flags, shown.reason) == ("IDLE", ["DRAIN"], "xid 79 | GPU 3")
    multi = parse_show_nodes(run(controller, "scontrol", "show", "node").stdout).by_name()
    assert list(multi) == ["gpu001", "gpu002", "gpu003"] and multi["gpu002"].reason == "xid 79 | GPU 3"


def test_resume_clears_the_drain_and_a_second_resume_is_refused_as_slurm_does(controller):
    run(controller, "scontrol", "update", "NodeName=gpu001", "State=DRAIN", "Reason=fan")
    assert run(controller, "scontrol", "update", "NodeName=gpu001", "State=RESUME").exit_code == 0
    assert not parse_sinfo_nodes(run(controller, *SINFO).stdout).by_name()["gpu001"].drained
    again = run(controller, "scontrol", "update", "NodeName=gpu001", "State=RESUME")
    assert (again.exit_code, again.stderr) == (1, "slurm_update error: Invalid node state specified\n")


def test_reboot_asap_drains_with_the_reason_and_resumes_next(controller):
    argv = ["scontrol", "reboot", "ASAP", "nextstate=RESUME", "reason=firmware 2.1", "gpu003"]
    assert run(controller, *argv).exit_code == 0
    listed = parse_sinfo_nodes(run(controller, *SINFO).stdout).by_name()["gpu003"]
    assert (listed.state, listed.reason) == ("REBOOT", "firmware 2.1")
    record = run(controller, "scontrol", "show", "node", "-o", "gpu003").stdout
    assert "State=IDLE+DRAIN+REBOOT_REQUESTED " in record and " NextState=RESUME " in record
    assert parse_show_nodes(record).nodes[0].drain_state == "DRAINED"


def test_unknown_nodes_missing_reasons_and_bad_formats_get_slurms_errors(controller):
    unknown = run(controller, "scontrol", "update", "NodeName=gpu999", "State=DRAIN", "Reason=x")
    assert (unknown.exit_code, unknown.stderr) == (1, "slurm_update error: Invalid node name specified\n")
    no_reason = run(controller, "scontrol", "update", "NodeName=gpu001", "State=DRAIN")
    assert no_reason.exit_code == 1 and "You must specify a reason" in no_reason.stderr
    reboot = run(controller, "scontrol", "reboot", "ASAP", "gpu999")
    assert reboot.stderr == "scontrol_reboot_nodes error: Invalid node name specified\n"
    missing = run(controller, "scontrol", "show", "node", "gpu999")
    assert (missing.exit_code, missing.stderr) == (1, "Node gpu999 not found\n")
    assert run(controller, "sinfo", "-N", "-o", "%Z").exit_code == 1
    assert controller.state.slurm_nodes == {}  # nothing refused changed the controller


def test_a_drained_node_still_running_a_slurm_job_is_draining(controller, monkeypatch):
    monkeypatch.setattr(slurmctld, "_allocated", lambda: {"gpu001"})
    run(controller, "scontrol", "update", "NodeName=gpu[001-002]", "State=DRAIN", "Reason=maintenance")
    listed = parse_sinfo_nodes(run(controller, *SINFO).stdout).by_name()
    assert (listed["gpu001"].drain_state, listed["gpu002"].drain_state) == ("DRAINING", "DRAINED")
    (shown,) = parse_show_nodes(run(controller, "scontrol", "show", "node", "gpu001").stdout).nodes
    assert (shown.state, shown.flags) == ("ALLOCATED", ["DRAIN"])
