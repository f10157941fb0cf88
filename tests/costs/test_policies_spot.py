"""Cost policy 2, spot capacity: which preemptible workloads and nodes the dry run picks (never a node with standard
or critical work), the saving from the nodes' measured energy at the spot discount, apply and revert, and the
PriorityClass, node taint, pod placement and Slurm artefacts."""

import datetime as dt

import pytest
import yaml
from django.utils import timezone

from apps.costs import artefacts
from apps.costs import services as policies
from apps.costs.choices import ActionState
from apps.costs.models import CostPolicy
from apps.costs.policies.base import policy_kind
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node
from apps.monitoring.telemetry import SimulatorTelemetry
from apps.workloads.models import InferenceService, TrainingJob, TrainingJobNode

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_the_simulator")]


@pytest.fixture
def fleet(clock, db):
    load_cluster(ClusterShape(compute_nodes=4, nodes_per_rack=4, management_nodes=0))
    nodes = {node.hostname: node for node in Node.objects.all()}
    service = InferenceService.objects.create(
        name="chat", model="m", design_tokens_per_second=5000, workload_class="critical"
    )
    service.nodes.set([nodes["gpu001"], nodes["gpu002"]])
    job = TrainingJob.objects.create(name="sweep", workload_class="preemptible", state="running")
    for rank, host in enumerate(("gpu003", "gpu004")):
        TrainingJobNode.objects.create(job=job, node=nodes[host], node_rank=rank)
    two_hours_ago = timezone.now() - dt.timedelta(hours=2)
    InferenceService.objects.update(created=two_hours_ago)
    TrainingJob.objects.update(created=two_hours_ago, started_at=two_hours_ago)
    Node.objects.update(created=two_hours_ago - dt.timedelta(hours=1))
    return job


@pytest.fixture
def policy(fleet):
    return CostPolicy.objects.create(
        name="spot", kind="spot-capacity", scope="cluster", parameters={"spot_discount": 0.6, "window_minutes": 60}
    )


def test_the_dry_run_puts_only_preemptible_work_on_spot_and_saves_from_its_energy(policy, operator):
    now = timezone.now().timestamp()
    action = policies.dry_run(policy=policy, user=operator, now=now)

    assert [row["workload"] for row in action.plan] == ["sweep"]  # the critical service stays where it is
    row = action.plan[0]
    assert row["hostnames"] == ["gpu003", "gpu004"] and row["workload_kind"] == "training"
    joules = SimulatorTelemetry().energy_joules(hostnames=["gpu003", "gpu004"], start=now - 3600, end=now)
    assert row["energy_kwh_per_day"] == pytest.approx(joules / 3.6e6 * 24, rel=1e-3)
    assert row["energy_kwh_per_day"] > 2 * 8 * 0.3 * 24  # two busy 8-GPU nodes, well above idle
    assert action.expected_kwh_per_day == pytest.approx(0.6 * row["energy_kwh_per_day"], rel=1e-3)
    assert action.expected_money_per_day == pytest.approx(action.expected_kwh_per_day * 0.15)
    lines = action.commands["kubernetes"]
    assert "kubectl taint nodes gpu003 rackpilot.io/spot=true:NoSchedule --overwrite" in lines
    assert "kubectl taint nodes gpu004 rackpilot.io/spot=true:NoSchedule-" in action.revert_commands["kubernetes"]
    assert any("pod template" in note for note in action.notes)  # a training job takes it at its next launch


def test_the_proposal_follows_the_workloads_and_their_load(policy, fleet, operator):
    now = timezone.now().timestamp()
    busy = policies.dry_run(policy=policy, user=operator, now=now).expected_kwh_per_day

    # A node shared with standard work is left out.
    other = InferenceService.objects.create(name="embed", model="e", design_tokens_per_second=100)
    other.nodes.set(Node.objects.filter(hostname="gpu004"))
    action = policies.dry_run(policy=policy, user=operator, now=now)
    assert action.plan[0]["hostnames"] == ["gpu003"]
    assert any("gpu004 also run standard or critical work" in note for note in action.notes)
    other.delete()

    # The job stops: its nodes idle, the energy (and the saving) falls; no preemptible work: nothing to do.
    TrainingJob.objects.update(state="completed")
    InferenceService.objects.filter(name="chat").update(workload_class="preemptible")
    action = policies.dry_run(policy=policy, user=operator, now=now)
    assert [row["workload"] for row in action.plan] == ["chat"]
    assert action.plan[0]["hostnames"] == ["gpu001", "gpu002"] and action.expected_kwh_per_day < busy
    InferenceService.objects.update(workload_class="standard")
    with pytest.raises(policies.PolicyError, match="no active preemptible workload"):
        policies.dry_run(policy=policy, user=operator, now=now)


def test_apply_records_the_spot_placement_and_revert_undoes_it(policy, operator, viewer):
    action = policies.dry_run(policy=policy, user=operator)
    with pytest.raises(policies.PolicyError):
        policies.approve(action=action, user=viewer)
    action = policies.apply(action=policies.approve(action=action, user=operator), user=operator)
    assert action.state == ActionState.APPLIED and "gpu003, gpu004 are spot capacity for sweep" in action.message
    with pytest.raises(policies.PolicyError, match="already on spot capacity"):
        policies.dry_run(policy=policy, user=operator)

    action = policies.revert(action=action, user=operator)
    assert action.state == ActionState.REVERTED and action.reverted_at
    assert policies.dry_run(policy=policy, user=operator).plan[0]["workload"] == "sweep"


def test_the_artefacts_are_valid_priority_classes_taints_placement_and_slurm(policy, operator):
    InferenceService.objects.update(workload_class="preemptible")
    action = policies.dry_run(policy=policy, user=operator)
    files = {artefact.name: artefact for artefact in policy_kind(policy.kind).artefacts(action)}
    assert set(files) == {"priority-classes", "spot-nodes", "pod-placement", "slurm-spot"}

    classes = list(yaml.safe_load_all(files["priority-classes"].content))
    assert [(c["kind"], c["metadata"]["name"]) for c in classes] == [
        ("PriorityClass", "rackpilot-preemptible"),
        ("PriorityClass", "rackpilot-critical"),
    ]
    assert classes[0]["preemptionPolicy"] == "Never" and classes[0]["value"] < classes[1]["value"]
    nodes = list(yaml.safe_load_all(files["spot-nodes"].content))
    assert [node["metadata"]["name"] for node in nodes] == ["gpu001", "gpu002", "gpu003", "gpu004"]
    assert nodes[0]["spec"]["taints"] == [{"key": "rackpilot.io/spot", "value": "true", "effect": "NoSchedule"}]
    patches = list(yaml.safe_load_all(files["pod-placement"].content))
    assert [patch["metadata"]["name"] for patch in patches] == ["sweep", "chat"]
    pod = patches[0]["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "rackpilot-preemptible"
    assert pod["tolerations"][0]["key"] == "rackpilot.io/spot"
    assert "PartitionName=spot Nodes=gpu001,gpu002,gpu003,gpu004" in files["slurm-spot"].content
    assert any(line.startswith("kubectl patch deployment/chat -p") for line in action.commands["kubernetes"])

    with pytest.raises(artefacts.ArtefactError, match="unknown field"):
        artefacts.validate_priority_classes(files["priority-classes"].content.replace("value:", "valeu:"))
    with pytest.raises(artefacts.ArtefactError, match="no toleration"):
        artefacts.validate_pod_placement(files["pod-placement"].content.replace("key: rackpilot.io/spot", "key: x"))
    with pytest.raises(artefacts.ArtefactError, match="Key=Value"):
        artefacts.validate_slurm(files["slurm-spot"].content + "PartitionName=spot Nodes=gpu001;rm\n")
