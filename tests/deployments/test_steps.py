"""Step classes on their own: the same reads judged against what the inventory or the plan expects."""

import ast
import dataclasses
from pathlib import Path

import pytest

from apps.deployments import steps as steps_package
from apps.deployments.choices import Outcome, Problem
from apps.deployments.context import node_contexts
from apps.deployments.services import create_deployment
from apps.deployments.steps import STEPS
from apps.deployments.steps.base import Finding, Output
from apps.deployments.suggestions import ADVICE
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


def test_every_problem_has_advice():
    assert set(ADVICE) == set(Problem)
    for problem, advice in ADVICE.items():
        assert "{where}" in advice.title, problem
        assert all((advice.cause, advice.next_check, advice.fix)), problem


def _problems_in(expression: ast.expr, where: str) -> set[str]:
    """The Problem members an expression in a problem position can give; a bare string other than "" fails (a
    condition's strings, as in `"" if verdict in ("pass", "warn") else Problem.TOPOLOGY`, are not what it gives)."""
    tests = [node.test for node in ast.walk(expression) if isinstance(node, ast.IfExp)]
    conditions = {id(sub) for test in tests for sub in ast.walk(test)}
    names = set()
    for part in ast.walk(expression):
        if id(part) in conditions:
            continue
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            assert part.value == "", f"{where}: problem {part.value!r} is a bare string, not a Problem"
        elif isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) and part.value.id == "Problem":
            names.add(part.attr)
    return names


def test_every_problem_a_step_can_emit_is_a_problem_member():
    emitted: set[str] = set()
    # The steps, and the cluster-acceptance phase that follows them.
    sources = sorted(Path(steps_package.__file__).parent.glob("*.py"))
    sources.append(Path(steps_package.__file__).parent.parent / "cluster.py")
    for path in sources:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            where = f"{path.name}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.keyword) and node.arg == "problem":
                emitted |= _problems_in(node.value, where)
            elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(ast.unparse(target).split(".")[-1] == "problem" for target in targets):
                    emitted |= _problems_in(node.value, where)
            elif isinstance(node, ast.Dict):  # the cluster phase's suggestions: {"problem": Problem.X, ...}
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "problem":
                        emitted |= _problems_in(value, where)

    assert emitted - set(Problem.names) == set(), "steps name problems that are not Problem members"
    assert set(Problem.names) - emitted == set(), "Problem members no step emits (advice nobody reads)"


def test_a_finding_refuses_a_problem_that_is_not_a_member():
    assert Finding(check="mtu", outcome=Outcome.FAIL, criterion="MTU", problem="mtu").problem is Problem.MTU
    with pytest.raises(ValueError):
        Finding(check="mtu", outcome=Outcome.FAIL, criterion="MTU", problem="mtu_mismatch")
