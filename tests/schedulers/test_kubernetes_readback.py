"""Kubernetes read back into Rackpilot: each node's cordon, taints and conditions from `kubectl get nodes -o json`
(read through the kubernetes client's models), a node cordoned or tainted outside Rackpilot shown as a difference
with its reason, and the quarantine (cordon + taint + drain) and its undoing read back after they run."""

import json

import pytest
from django.urls import reverse

from apps.inventory.models import Node
from apps.jobs import services as jobs
from apps.jobs.choices import JobStatus, StepStatus
from apps.parsers.errors import ParseError
from apps.parsers.kubernetes import parse_get_nodes
from apps.schedulers import services
from apps.schedulers.choices import DifferenceKind
from apps.schedulers.commands import quarantine_taint, quarantine_value
from apps.schedulers.models import SchedulerNodeState
from apps.simulator.models import SimChange
from apps.simulator.services import run_command

pytestmark = pytest.mark.django_db(transaction=True)


def controller():
    return services.scheduler_controller()


def kubectl(*argv):
    """An administrator's own kubectl on the controller, not through Rackpilot."""
    answer = run_command(node=controller(), argv=["kubectl", *argv])
    assert answer.exit_code == 0, answer.stderr
    return answer


def readback(run_shards):
    job = run_shards(services.start_readback(transport="sim", scheduler="kubernetes"))
    assert job.status == JobStatus.SUCCEEDED, list(job.events.values_list("message", flat=True))
    return job


def action(run_shards, **parameters):
    job = jobs.create_job(
        kind="scheduler-action",
        targets=jobs.TargetSpec(nodes=(controller().hostname,)),
        parameters={"scheduler": "kubernetes", **parameters},
        transport="sim",
        queue=False,
    )
    return run_shards(job)


def test_every_node_is_read_with_its_conditions_and_nothing_differs(demo_cluster, run_shards):
    job = readback(run_shards)
    # The compute nodes and the control plane, whose own taint keeps no work off a node Rackpilot schedules.
    assert job.steps.get().summary == f"{services.scheduled_nodes().count() + 1} nodes, 0 drained or cordoned"
    assert SchedulerNodeState.objects.count() == services.scheduled_nodes().count()
    view = SchedulerNodeState.objects.get(node__hostname="gpu001")
    assert (view.scheduler, view.state_text, view.drain_state, view.taints) == ("kubernetes", "Ready", "", [])
    assert [c["type"] for c in view.conditions] == ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
    assert services.scheduler_differences() == []


def test_a_node_cordoned_and_tainted_outside_rackpilot_is_a_difference_with_its_reason(
    demo_cluster, run_shards, api_as, viewer, browser_as
):
    kubectl("cordon", "gpu005")
    kubectl("taint", "nodes", "gpu005", "maintenance=psu-swap:NoExecute")
    readback(run_shards)

    view = SchedulerNodeState.objects.get(node__hostname="gpu005")
    assert (view.state_text, view.drain_state, view.reason) == (
        "Ready+SchedulingDisabled",
        "drained",
        "maintenance=psu-swap:NoExecute",
    )
    assert view.reason_at is not None  # Kubernetes stamps a NoExecute taint
    assert {t["key"] for t in view.taints} == {"maintenance", "node.kubernetes.io/unschedulable"}
    (difference,) = services.scheduler_differences()
    assert (difference.hostname, difference.kind, difference.scheduler) == (
        "gpu005",
        DifferenceKind.DRAINED_OUTSIDE,
        "kubernetes",
    )
    assert "maintenance=psu-swap:NoExecute" in difference.message

    listed = api_as(viewer).get("/api/scheduler-nodes/").json()["results"]
    row = next(row for row in listed if row["node"] == "gpu005")
    assert (row["scheduler"], row["state"], row["drain_state"]) == ("kubernetes", "Ready+SchedulingDisabled", "drained")
    assert {"key": "maintenance", "value": "psu-swap", "effect": "NoExecute"}.items() <= row["taints"][0].items()
    assert [c["type"] for c in row["conditions"]][-1] == "Ready"

    health = api_as(viewer).get("/api/health/").json()
    gpu005 = next(node for node in health["nodes"] if node["node"] == "gpu005")
    assert any("maintenance=psu-swap" in reason for reason in gpu005["reasons"])

    page = browser_as(viewer).get(reverse("node-detail", args=[Node.objects.get(hostname="gpu005").public_id]))
    text = page.content.decode()
    assert "Kubernetes says <strong>drained</strong> (Ready+SchedulingDisabled)" in text
    assert "maintenance=psu-swap:NoExecute" in text

    # Uncordoned and untainted outside Rackpilot again: read back, nothing differs.
    kubectl("uncordon", "gpu005")
    kubectl("taint", "nodes", "gpu005", "maintenance:NoExecute-")
    readback(run_shards)
    assert services.scheduler_differences() == []


def test_a_problem_condition_and_a_node_not_ready_are_differences(demo_cluster, run_shards, api_as, viewer):
    # What node-problem-detector and a lost kubelet leave on the API server's Node objects.
    SimChange.objects.create(
        node=controller(),
        key="kube:gpu002",
        value={
            "conditions": [
                {
                    "type": "GpuXidError",
                    "status": "True",
                    "reason": "Xid79",
                    "message": "GPU 3 has fallen off the bus",
                    "lastTransitionTime": "2026-03-01T10:00:00Z",
                }
            ]
        },
    )
    SimChange.objects.create(
        node=controller(),
        key="kube:gpu004",
        value={
            "conditions": [
                {
                    "type": "Ready",
                    "status": "Unknown",
                    "reason": "NodeStatusUnknown",
                    "message": "Kubelet stopped posting node status.",
                    "lastTransitionTime": "2026-03-01T10:00:00Z",
                }
            ]
        },
    )
    readback(run_shards)
    differences = {(d.hostname, d.kind): d for d in services.scheduler_differences()}
    assert set(differences) == {("gpu002", DifferenceKind.CONDITION), ("gpu004", DifferenceKind.DOWN)}
    assert "GpuXidError: GPU 3 has fallen off the bus" in differences["gpu002", DifferenceKind.CONDITION].message
    assert differences["gpu004", DifferenceKind.DOWN].state == "Unknown"
    assert "Kubelet stopped posting node status." in differences["gpu004", DifferenceKind.DOWN].reason
    health = {node["node"]: node for node in api_as(viewer).get("/api/health/").json()["nodes"]}
    assert health["gpu004"]["healthy"] is False


def test_quarantine_cordons_taints_drains_and_reads_back(demo_cluster, run_shards):
    reason = "rackpilot xid79: GPU 3 fell off the bus"
    job = action(run_shards, action="drain", node="gpu003", reason=reason)
    assert job.status == JobStatus.SUCCEEDED
    steps = dict(job.steps.values_list("step", "status"))
    assert steps == {
        "kubectl-cordon": StepStatus.SUCCEEDED,
        "kubectl-taint-quarantine": StepStatus.SUCCEEDED,
        "kubectl-drain": StepStatus.SUCCEEDED,
        "verify": StepStatus.SUCCEEDED,
    }
    verify = job.steps.get(step="verify")
    assert (
        verify.summary == "Kubernetes: cordoned, taint rackpilot.io/quarantine=rackpilot-xid79-GPU-3-fell-off-the-bus"
    )
    view = SchedulerNodeState.objects.get(node__hostname="gpu003")
    assert (view.scheduler, view.drain_state, view.reason) == (
        "kubernetes",
        "drained",
        "rackpilot.io/quarantine=rackpilot-xid79-GPU-3-fell-off-the-bus:NoSchedule",
    )
    assert services.is_quarantined(view)

    undo = action(run_shards, action="undrain", node="gpu003")
    assert undo.status == JobStatus.SUCCEEDED
    assert undo.steps.get(step="verify").summary == "Kubernetes: schedulable, no quarantine taint"
    view.refresh_from_db()
    assert (view.drain_state, view.reason, view.flags) == ("", "", [])
    assert not services.is_quarantined(view)

    # A node cordoned outside Rackpilot, without the taint: the undrain's taint removal finds none, the uncordon
    # still runs, and the read back says it is back.
    kubectl("cordon", "gpu006")
    again = action(run_shards, action="undrain", node="gpu006")
    assert again.status == JobStatus.SUCCEEDED
    assert again.steps.get(step="kubectl-untaint-quarantine").summary == "Kubernetes: no quarantine taint to remove"


def test_a_quarantine_over_another_reason_replaces_the_taint_and_the_read_back_judges(demo_cluster, run_shards):
    kubectl("taint", "nodes", "gpu007", "rackpilot.io/quarantine=other:NoSchedule")
    job = action(run_shards, action="drain", node="gpu007", reason="fan swap")
    assert job.status == JobStatus.SUCCEEDED  # --overwrite replaced it
    assert job.steps.get(step="verify").summary.endswith("rackpilot.io/quarantine=fan-swap")
    # Someone removes the taint outside Rackpilot and leaves the cordon: still drained, with no reason to show
    # (Kubernetes keeps none for a cordon).
    kubectl("taint", "nodes", "gpu007", "rackpilot.io/quarantine:NoSchedule-")
    view = services.kubernetes_view(parse_get_nodes(kubectl("get", "node", "gpu007", "-o", "json").stdout).nodes[0])
    assert (view["drain_state"], view["flags"], view["reason"]) == ("drained", ["SchedulingDisabled"], "")


def test_the_quarantine_commands_and_their_placeholders():
    from apps.deployments.node_operations import scheduler_commands
    from apps.nodeexec.catalogue import CommandError, build

    assert scheduler_commands(scheduler="kubernetes", action="drain", node="gpu001", reason="fan swap (ticket 42)") == [
        "kubectl cordon gpu001",
        "kubectl taint nodes gpu001 rackpilot.io/quarantine=fan-swap-ticket-42:NoSchedule --overwrite",
        "kubectl drain gpu001 --ignore-daemonsets --delete-emptydir-data",
        "kubectl get node gpu001 -o json",
    ]
    assert scheduler_commands(scheduler="kubernetes", action="undrain", node="gpu001") == [
        "kubectl taint nodes gpu001 rackpilot.io/quarantine:NoSchedule-",
        "kubectl uncordon gpu001",
        "kubectl get node gpu001 -o json",
    ]
    assert quarantine_value("") == "rackpilot" and len(quarantine_value("x" * 300)) == 63
    assert quarantine_value("--ECC storm!--") == "ECC-storm"
    for bad in ("rackpilot.io/quarantine=a b:NoSchedule", "rackpilot.io/quarantine=x:NoExecute", "other=x:NoSchedule"):
        with pytest.raises(CommandError):
            build("kubectl-taint-quarantine", scheduler_node="gpu001", k8s_quarantine_taint=bad)
    assert build("kubectl-taint-quarantine", scheduler_node="gpu001", k8s_quarantine_taint=quarantine_taint("x"))


def test_the_parser_reads_nodes_through_the_client_models():
    listing = parse_get_nodes(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {"name": "gpu001"},
                        "spec": {
                            "unschedulable": True,
                            "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
                        },
                        "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]},
                    }
                ],
            }
        )
    )
    (node,) = listing.nodes
    assert (node.name, node.unschedulable, node.ready, node.taints[0].text) == (
        "gpu001",
        True,
        "False",
        "nvidia.com/gpu=present:NoSchedule",
    )
    view = services.kubernetes_view(node)
    assert (view["state"], view["flags"], view["reason"]) == (
        "NotReady",
        ["SchedulingDisabled"],
        "NotReady: KubeletNotReady",
    )
    for text in (
        "not json",
        '{"kind": "Pod"}',
        '{"kind": "Node", "metadata": {"name": "a"}, "spec": {"taints": [{}]}}',
    ):
        with pytest.raises(ParseError):
            parse_get_nodes(text)
