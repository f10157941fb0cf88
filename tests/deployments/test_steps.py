"""Step classes on their own: the same reads judged against what the inventory or the plan expects."""

import dataclasses

import pytest

from apps.deployments.choices import Outcome
from apps.deployments.context import node_contexts
from apps.deployments.services import create_deployment
from apps.deployments.steps import STEPS
from apps.deployments.steps.base import Output
from apps.inventory.models import Node
from apps.jobs.services import TargetSpec
from apps.parsers.nccl_log import socket_ifname_selects
from apps.simulator.services import run_command


def _judge(step_name: str, context):
    step = STEPS[step_name]
    node = Node.objects.get(hostname=context.hostname)
    outputs = {}
    for read in step.reads(context):
        answer = run_command(node=node, argv=read.argv())
        outputs[read.key] = Output(answer.exit_code == 0, answer.stdout, answer.stderr)
    return step.judge(context, outputs)


@pytest.fixture
def gpu031(demo_cluster, operator):
    deployment = create_deployment(name="steps", targets=TargetSpec(nodes=("gpu031",)), user=operator)
    return node_contexts(deployment, with_topology=False)["gpu031"]


@pytest.mark.django_db
def test_discovery_flags_a_nic_whose_mac_is_not_the_inventorys(gpu031):
    assert {finding.outcome for finding in _judge("discovery", gpu031)} <= {Outcome.PASS, Outcome.WARN}
    swapped = dataclasses.replace(gpu031.data_nics[0], mac="0c:42:a1:ff:ff:ff")
    context = dataclasses.replace(gpu031, data_nics=(swapped, *gpu031.data_nics[1:]))
    failed = [finding for finding in _judge("discovery", context) if finding.outcome == Outcome.FAIL]
    assert [(f.check, f.subject, f.problem) for f in failed] == [("nic_identity", "ens1np0", "inventory_mismatch")]


@pytest.mark.django_db
def test_firmware_fix_flashes_only_the_drifted_component(gpu031):
    context = dataclasses.replace(gpu031, options={**gpu031.options, "baselines": {"bios": "2.5.0", "bmc": ""}})
    findings = _judge("firmware", context)
    assert [(f.check, f.outcome) for f in findings] == [("firmware_bios", Outcome.FAIL)]
    fixes = STEPS["firmware"].fixes(context, findings)
    assert [fix.text() for fix in fixes] == [
        "fwupdmgr install --no-reboot-check --assume-yes /var/lib/rackpilot/firmware/bios/2.5.0.cab"
    ]


def test_nccl_socket_ifname_is_read_as_nccl_reads_it():
    names = ["lo", "eno1", "ens1np0", "ens2np0", "docker0"]
    assert socket_ifname_selects("ens", names) == ["ens1np0", "ens2np0"]
    assert socket_ifname_selects("=ens1", names) == []
    assert socket_ifname_selects("^docker,lo", names) == ["eno1", "ens1np0", "ens2np0"]
    assert socket_ifname_selects("eth9", names) == []
