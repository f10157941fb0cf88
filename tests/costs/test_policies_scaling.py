"""Cost policy 1, elastic scaling of an inference service: the dry run from the serving GPUs' utilisation (out above
threshold_up, in below threshold_down after the cool-down), the saving from the freed nodes' idle draw, apply and
revert of the replica count (and what it does to the simulated telemetry), and the KEDA / HPA artefacts."""

import datetime as dt
import math

import pytest
import yaml
from django.utils import timezone

from apps.core.models import AuditEntry
from apps.costs import artefacts
from apps.costs import services as policies
from apps.costs.choices import ActionState
from apps.costs.models import CostPolicy
from apps.costs.policies import scaling
from apps.costs.policies.base import policy_kind
from apps.deployments.artefacts.base import ArtefactError
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.gpu_power import gpu_power_model
from apps.inventory.models import Node
from apps.jobs.models import Job
from apps.monitoring.telemetry import SimulatorTelemetry, Window, current_workloads
from apps.simulator import services as simulator
from apps.workloads.models import InferenceService

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_the_simulator")]
POOL = ("gpu001", "gpu002", "gpu003", "gpu004")
PARAMETERS = {"threshold_up": 80, "threshold_down": 75, "window_minutes": 15, "cool_down_minutes": 30}


@pytest.fixture
def service(clock, db):
    load_cluster(ClusterShape(compute_nodes=5, nodes_per_rack=5, management_nodes=0))
    service = InferenceService.objects.create(name="chat", model="m", design_tokens_per_second=5000)
    service.nodes.set(Node.objects.filter(hostname__in=POOL))
    two_days_ago = timezone.now() - dt.timedelta(days=2)
    InferenceService.objects.update(created=two_days_ago)
    Node.objects.update(created=two_days_ago - dt.timedelta(hours=1))
    service.refresh_from_db()  # saving it later keeps the start two days ago
    return service


@pytest.fixture
def policy(service):
    return CostPolicy.objects.create(
        name="elastic", kind="elastic-scaling", scope="service", service=service, parameters=make(PARAMETERS, service)
    )


def make(parameters: dict, service) -> dict:
    probe = CostPolicy(kind="elastic-scaling", scope="service", service=service)
    return policies.check_parameters(kind=probe.kind, parameters=parameters, nodes=probe.nodes(), policy=probe)


def demand_extremes() -> tuple[float, float]:
    """(a time of the day's lowest demand, of its highest), within the day before the test's clock."""
    model = simulator.telemetry_model(workloads=current_workloads())
    run = model.service("chat")
    times = [timezone.now().timestamp() - k * 300 for k in range(288)]
    return min(times, key=lambda t: model.demand(run, t)), max(times, key=lambda t: model.demand(run, t))


def step_means(hostnames, now, minutes=15):
    span = 60.0 * minutes
    step = max(60.0, span / 30)
    window = Window(end=now, span=span, step=step, rate_range=step)
    return scaling.ElasticScaling().step_means(SimulatorTelemetry(), list(hostnames), window)


def test_a_low_load_proposes_scaling_in_with_the_freed_nodes_idle_draw_as_the_saving(policy, operator):
    trough, _ = demand_extremes()
    action = policies.dry_run(policy=policy, user=operator, now=trough)

    row = action.plan[0]
    means = step_means(POOL, trough)
    assert max(means) < 75  # four replicas at the day's low demand
    assert row["direction"] == "in" and row["replicas_before"] == 4
    assert row["high_util"] == pytest.approx(max(means), abs=0.1)
    assert row["replicas_after"] == math.ceil(4 * max(means) / 80) < 4
    freed = list(POOL[row["replicas_after"] :])
    assert row["changed_nodes"] == freed and row["nodes_after"] == list(POOL[: row["replicas_after"]])
    assert row["saving_w"] == pytest.approx(len(freed) * 8 * gpu_power_model("H200 SXM").idle_w)
    assert action.expected_kwh_per_day == pytest.approx(row["saving_w"] * 24 / 1000)
    assert action.expected_money_per_day == pytest.approx(action.expected_kwh_per_day * 0.15)
    assert action.commands == {"kubernetes": [f"kubectl scale deployment/chat --replicas={row['replicas_after']}"]}
    assert action.revert_commands == {"kubernetes": ["kubectl scale deployment/chat --replicas=4"]}


def test_the_proposal_follows_the_load(policy, service, operator):
    trough, peak = demand_extremes()
    policy.parameters = make({**PARAMETERS, "threshold_up": 95}, service)
    policy.save()
    at_trough = policies.dry_run(policy=policy, user=operator, now=trough).plan[0]["replicas_after"]
    at_peak = policies.dry_run(policy=policy, user=operator, now=peak).plan[0]["replicas_after"]
    assert (at_trough, at_peak) == (2, 3)  # more demand, more replicas kept: 30 % and 70 % busy on four

    # Between the thresholds nothing is proposed; one replica left at the peak is overloaded: scale out.
    policy.parameters = make({**PARAMETERS, "threshold_down": 20}, service)
    policy.save()
    with pytest.raises(policies.PolicyError, match="between 20 % and 80 %"):
        policies.dry_run(policy=policy, user=operator, now=peak)
    service.replicas = 1
    service.save()
    action = policies.dry_run(policy=policy, user=operator, now=peak)
    row = action.plan[0]
    assert min(step_means(POOL[:1], peak)) > 80
    assert row["direction"] == "out" and row["replicas_before"] == 1
    assert row["replicas_after"] == min(4, math.ceil(row["mean_util"] / 80))
    assert row["changed_nodes"] == list(POOL[1 : row["replicas_after"]])
    assert action.expected_kwh_per_day < 0  # scaling out costs the idle draw it brings back


def test_apply_scales_the_simulated_service_in_and_revert_restores_it(policy, service, operator):
    trough, _ = demand_extremes()
    action = policies.dry_run(policy=policy, user=operator, now=trough)
    after = action.plan[0]["replicas_after"]
    with pytest.raises(policies.PolicyError) as error:
        policies.apply(action=action, user=operator)
    assert "approved_by" in error.value.errors

    policies.approve(action=action, user=operator)
    action = policies.apply(action=action, user=operator)
    service.refresh_from_db()
    assert action.state == ActionState.APPLIED and action.applied_at and service.replicas == after
    # The freed nodes idle; the replicas left carry the same demand, each busier.
    assert max(step_means(POOL[after:], trough)) == 0
    busier = sum(step_means(POOL[:after], trough)) / len(step_means(POOL[:after], trough))
    assert busier == pytest.approx(action.plan[0]["expected_util_after"], rel=0.05)

    action = policies.revert(action=action, user=operator)
    service.refresh_from_db()
    assert action.state == ActionState.REVERTED and service.replicas is None
    assert service.serving_hostnames() == list(POOL)
    entries = AuditEntry.objects.filter(object_type="costs.policyaction", object_id=str(action.pk))
    assert [entry.action for entry in entries.order_by("pk") if entry.action in ("approve", "start")] == [
        "approve",
        "start",
        "start",
    ]
    assert AuditEntry.objects.filter(object_type="workloads.inferenceservice", action="update").count() == 2


def test_an_action_judged_on_other_replicas_is_refused(policy, service, operator):
    trough, _ = demand_extremes()
    action = policies.approve(action=policies.dry_run(policy=policy, user=operator, now=trough), user=operator)
    service.replicas = 3
    service.save()
    with pytest.raises(policies.PolicyError, match="has 3 replica"):
        policies.apply(action=action, user=operator)
    action.refresh_from_db()
    service.refresh_from_db()
    assert action.state == ActionState.APPROVED and service.replicas == 3


def test_scaling_in_waits_for_the_cool_down_so_it_cannot_flap(policy, operator):
    trough, _ = demand_extremes()
    action = policies.approve(action=policies.dry_run(policy=policy, user=operator, now=trough), user=operator)
    policies.revert(action=policies.apply(action=action, user=operator), user=operator)  # just scaled (back)

    with pytest.raises(policies.PolicyError, match="waits for the 30 min cool-down"):
        policies.dry_run(policy=policy, user=operator, now=timezone.now().timestamp() + 29 * 60)
    two_days_on = trough + 2 * 86400  # the same low demand (a daily wave), long after the cool-down
    assert policies.dry_run(policy=policy, user=operator, now=two_days_on).plan[0]["direction"] == "in"


def test_a_newer_scaling_supersedes_the_one_in_force(policy, service, operator):
    trough, peak = demand_extremes()
    first = policies.approve(action=policies.dry_run(policy=policy, user=operator, now=trough), user=operator)
    first = policies.apply(action=first, user=operator)
    policy.parameters = make({**PARAMETERS, "threshold_down": 10, "threshold_up": 30}, service)
    policy.save()
    second = policies.approve(action=policies.dry_run(policy=policy, user=operator, now=peak), user=operator)
    assert second.plan[0]["direction"] == "out"
    policies.apply(action=second, user=operator)
    first.refresh_from_db()
    assert first.state == ActionState.REVERTED and "superseded" in first.message
    assert list(policy.actions.in_force()) == [second]


def test_the_artefacts_are_a_valid_keda_scaled_object_and_hpa(policy, operator):
    trough, _ = demand_extremes()
    action = policies.dry_run(policy=policy, user=operator, now=trough)
    files = {artefact.name: artefact for artefact in policy_kind(policy.kind).artefacts(action)}
    assert set(files) == {"keda-scaledobject", "hpa"}

    scaled = yaml.safe_load(files["keda-scaledobject"].content)
    assert (scaled["apiVersion"], scaled["kind"]) == ("keda.sh/v1alpha1", "ScaledObject")
    assert scaled["spec"]["scaleTargetRef"]["name"] == "chat"
    assert (scaled["spec"]["minReplicaCount"], scaled["spec"]["maxReplicaCount"]) == (1, 4)
    trigger = scaled["spec"]["triggers"][0]
    assert trigger["type"] == "prometheus" and trigger["metadata"]["threshold"] == "80"
    assert "DCGM_FI_DEV_GPU_UTIL" in trigger["metadata"]["query"] and "[15m]" in trigger["metadata"]["query"]
    behaviour = scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behaviour["scaleDown"]["stabilizationWindowSeconds"] == 30 * 60

    hpa = yaml.safe_load(files["hpa"].content)
    assert (hpa["apiVersion"], hpa["kind"]) == ("autoscaling/v2", "HorizontalPodAutoscaler")
    assert hpa["spec"]["behavior"] == behaviour and hpa["spec"]["maxReplicas"] == 4

    # The validators catch what a hand edit could break.
    broken = files["keda-scaledobject"].content.replace("minReplicaCount: 1", "minReplicaCount: 9")
    with pytest.raises(ArtefactError, match="minReplicaCount is above"):
        artefacts.validate_scaled_object(broken)
    with pytest.raises(ArtefactError, match="maxReplicas"):
        artefacts.validate_hpa(files["hpa"].content.replace("maxReplicas: 4", "maxReplicas: many"))
    with pytest.raises(ArtefactError, match="unknown field"):
        artefacts.validate_hpa(files["hpa"].content.replace("minReplicas:", "minReplica:"))


def test_a_service_name_becomes_a_kubernetes_name():
    assert artefacts.k8s_name("Chat Bot_v2 (EU)") == "chat-bot-v2-eu"
    assert artefacts.k8s_name("§§") == "workload"


def test_with_standing_approval_the_evaluation_scales_and_then_respects_the_cool_down(policy, service):
    trough, _ = demand_extremes()
    policy.standing_approval = True
    policy.save()
    outcome = policies.evaluate(policy=policy, now=trough)
    assert outcome.startswith("applying with standing approval: chat")
    service.refresh_from_db()
    action = policy.actions.get()
    assert action.state == ActionState.APPLIED and action.approval == "standing"
    assert service.replicas == action.plan[0]["replicas_after"]
    # At the same load the next evaluation starts no job (nothing on the nodes to enforce) and does not scale again:
    # the replicas left are below threshold_up, and scaling in further waits for the cool-down.
    outcome = policies.evaluate(policy=policy, now=trough)
    assert not Job.objects.exists() and policy.actions.count() == 1
    assert "below 75 %" in outcome and "scaling in waits for the 30 min cool-down" in outcome
