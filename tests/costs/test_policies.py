"""Cost policies, policy 4 (energy at low load): the dry run's saving from the model, approval (operator, standing),
apply and revert through the power-limit job on the simulator, the latency-SLO guard, re-applying after a reboot,
and the audit trail."""

import datetime as dt

import pytest
from django.utils import timezone

from apps.core.models import AuditEntry
from apps.costs import services as policies
from apps.costs.choices import ActionState, ApprovalKind
from apps.costs.models import CostPolicy, PolicyAction
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node
from apps.monitoring.models import Slo
from apps.monitoring.telemetry import current_workloads
from apps.simulator import services as simulator
from apps.simulator.models import SimChange
from apps.workloads.models import InferenceService

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_the_simulator")]
SERVING = ("gpu001", "gpu002")
PARAMETERS = {"utilisation_below": 80, "window_minutes": 30, "power_limit_w": 450}


@pytest.fixture
def fleet(clock, db):
    load_cluster(ClusterShape(compute_nodes=3, nodes_per_rack=3, management_nodes=0))
    service = InferenceService.objects.create(
        name="chat", model="m", design_tokens_per_second=5000, latency_target_ms=100
    )
    service.nodes.set(Node.objects.filter(hostname__in=SERVING))
    two_hours_ago = timezone.now() - dt.timedelta(hours=2)
    InferenceService.objects.update(created=two_hours_ago)
    Node.objects.update(created=two_hours_ago - dt.timedelta(hours=1))
    return service


@pytest.fixture
def policy(fleet):
    return CostPolicy.objects.create(name="low-load", kind="low_load_power", scope="cluster", parameters=PARAMETERS)


def model():
    return simulator.telemetry_model(workloads=current_workloads())


def limits(hostname: str) -> set[int]:
    state = simulator.node_state(node=Node.objects.get(hostname=hostname))
    return {gpu.power_cap_w for gpu in state.gpus}


def applied(action, run_shards, user):
    action = policies.approve(action=action, user=user)
    action = policies.apply(action=action, user=user)
    run_shards(action.apply_job)
    action.refresh_from_db()
    return action


def test_the_dry_run_shows_the_commands_and_a_saving_the_model_then_delivers(policy, operator):
    now = timezone.now().timestamp()
    action = policies.dry_run(policy=policy, user=operator, now=now)

    assert action.state == ActionState.PROPOSED and action.hostnames == list(SERVING)
    assert action.commands["gpu001"][0] == "nvidia-smi -i 0 -pl 450"
    assert action.revert_commands["gpu001"][0] == "nvidia-smi -i 0 -pl 700"
    assert any("gpu003" in note and "idle" in note for note in action.notes)  # nothing to save on an idle node
    assert len(action.plan) == 16 and {row["from_w"] for row in action.plan} == {700}
    assert 0.75 < action.throughput_factor < 0.85  # 450 W keeps ~80 % of the clocks under full load
    assert action.expected_money_per_day == pytest.approx(action.expected_kwh_per_day * 0.15)

    # What the cap would really have saved over the same window, from the simulator's model.
    before = model()
    for hostname in SERVING:
        simulator.run_command(node=Node.objects.get(hostname=hostname), argv=["nvidia-smi", "-pl", "450"])
    SimChange.objects.update(updated=timezone.now() - dt.timedelta(hours=3))  # in force all through the window
    after = model()
    start = now - action.window_seconds
    saved_j = sum(
        before.energy_j(host, gpu, start, now) - after.energy_j(host, gpu, start, now)
        for host in SERVING
        for gpu in range(8)
    )
    predicted_j = sum(row["saving_w"] for row in action.plan) * action.window_seconds
    assert saved_j > 0
    assert predicted_j == pytest.approx(saved_j, rel=0.03)
    assert action.expected_kwh_per_day == pytest.approx(saved_j / 3.6e6 * 86400 / action.window_seconds, rel=0.03)


def test_a_viewer_cannot_dry_run_approve_or_apply_and_nothing_changes(policy, viewer, operator):
    action = policies.dry_run(policy=policy, user=operator)
    for call in (
        lambda: policies.dry_run(policy=policy, user=viewer),
        lambda: policies.approve(action=action, user=viewer),
        lambda: policies.apply(action=action, user=viewer),
    ):
        with pytest.raises(policies.PolicyError):
            call()
    with pytest.raises(policies.PolicyError) as error:
        policies.apply(action=action, user=operator)  # not approved yet
    assert "approved_by" in error.value.errors
    action.refresh_from_db()
    assert action.state == ActionState.PROPOSED and not SimChange.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_apply_lowers_the_simulated_power_and_tokens_then_revert_restores(policy, operator, run_shards):
    action = policies.dry_run(policy=policy, user=operator)
    before = model()
    run = before.service("chat")
    peak = max((timezone.now().timestamp() + k * 600 for k in range(144)), key=lambda t: before.demand(run, t))

    action = applied(action, run_shards, operator)
    assert action.state == ActionState.APPLIED and action.applied_at and action.approval == ApprovalKind.OPERATOR
    assert action.approved_by == operator
    assert limits("gpu001") == limits("gpu002") == {450} and limits("gpu003") == {700}
    job = action.apply_job
    assert job.status == "succeeded" and job.transport == "sim"
    assert set(job.steps.values_list("step", flat=True)) == {"check", "set", "verify"}
    capped = model()
    old, new = before.gpu_reading("gpu001", 0, peak), capped.gpu_reading("gpu001", 0, peak)
    assert new["power_w"] < old["power_w"] and new["sm_mhz"] < old["sm_mhz"]
    # At 450 W the service keeps ~80 % of its capacity: the day's peak (70 % of design) still fits, but nearer the
    # ceiling, so requests take longer (tokens/s fall only below the demand: tests/simulator/test_power_limit.py).
    assert capped.service_capacity(run, peak) < 0.85 * before.service_capacity(run, peak)
    assert capped.service_rates(run, peak)["e2e_median"] > 1.2 * before.service_rates(run, peak)["e2e_median"]

    action = policies.revert(action=action, user=operator)
    run_shards(action.revert_job)
    action.refresh_from_db()
    assert action.state == ActionState.REVERTED and action.reverted_at
    assert limits("gpu001") == limits("gpu002") == {700}
    assert model().gpu_reading("gpu001", 0, peak)["power_w"] == pytest.approx(old["power_w"], rel=0.01)

    audited = list(
        AuditEntry.objects.filter(object_type="costs.policyaction", object_id=str(action.pk))
        .order_by("pk")
        .values_list("action", "object_repr")
    )
    assert ("approve", f"low-load: {action.reason}"[:200]) in audited
    # the approval's save is that one entry, not an "Updated" beside it (it read as both)
    assert [entry for entry, _ in audited].count("approve") == 1
    approved = AuditEntry.objects.get(object_type="costs.policyaction", object_id=str(action.pk), action="approve")
    assert approved.changes["state"][1] == "approved" and approved.changes["commands"][1] == action.commands
    assert [entry for entry in audited if entry[0] == "start"][0][1].startswith("apply low-load")
    assert [entry for entry in audited if entry[0] == "start"][1][1].startswith("revert low-load")


@pytest.mark.django_db(transaction=True)
def test_standing_approval_is_an_admins_and_lets_the_evaluation_apply(policy, operator, admin, run_shards):
    with pytest.raises(policies.PolicyError) as error:
        policies.set_standing_approval(policy=policy, user=operator, standing=True)
    assert "standing_approval" in error.value.errors
    assert "proposed" in policies.evaluate(policy=policy)  # without it, a proposal waits
    assert not SimChange.objects.exists()

    policies.set_standing_approval(policy=policy, user=admin, standing=True)
    outcome = policies.evaluate(policy=policy)
    action = PolicyAction.objects.get(state=ActionState.APPLYING)
    assert "standing approval" in outcome and action.approval == ApprovalKind.STANDING and action.approved_by is None
    run_shards(action.apply_job)
    assert limits("gpu001") == {450}


@pytest.mark.django_db(transaction=True)
def test_a_burning_latency_slo_blocks_applying_and_reverts_what_is_applied(policy, fleet, operator, run_shards):
    action = applied(policies.dry_run(policy=policy, user=operator), run_shards, operator)
    strict = Slo.objects.create(name="chat-p99", objective="latency_p99", scope="service", service=fleet, target=1)

    outcome = policies.evaluate(policy=policy)
    action.refresh_from_db()
    assert "SLO breach" in outcome and action.state == ActionState.REVERTING and "chat-p99" in action.revert_reason
    run_shards(action.revert_job)
    assert limits("gpu001") == {700}

    second = policies.approve(action=policies.dry_run(policy=policy, user=operator), user=operator)
    with pytest.raises(policies.PolicyError) as error:
        policies.apply(action=second, user=operator)
    assert "slo" in error.value.errors and "chat-p99" in error.value.errors["slo"]
    second.refresh_from_db()
    assert second.state == ActionState.APPROVED and limits("gpu001") == {700}
    strict.delete()
    assert policies.apply(action=second, user=operator).state == ActionState.APPLYING


@pytest.mark.django_db(transaction=True)
def test_after_a_reboot_the_evaluation_puts_the_limit_back(policy, operator, run_shards):
    action = applied(policies.dry_run(policy=policy, user=operator), run_shards, operator)
    simulator.reboot(node=Node.objects.get(hostname="gpu001"))
    assert limits("gpu001") == {700}

    policies.evaluate(policy=policy)
    job = action.policy.actions.get().apply_job  # the same action; the check runs as its own job
    enforce = type(job).objects.filter(kind="power-limit", parameters__mode="enforce").get()
    run_shards(enforce)
    action.refresh_from_db()
    assert limits("gpu001") == limits("gpu002") == {450}
    assert action.reapplied_count == 1 and "gpu001" in action.message and "gpu002" not in action.message
    assert AuditEntry.objects.filter(object_repr__startswith="re-applied power limits of low-load on gpu001").exists()


def test_parameters_are_checked_against_the_scope(fleet):
    nodes = Node.objects.all()
    with pytest.raises(Exception) as error:
        policies.check_parameters(kind="low_load_power", parameters={**PARAMETERS, "power_limit_w": 150}, nodes=nodes)
    assert "power_limit_w" in error.value.detail and "200–700 W" in str(error.value.detail["power_limit_w"])
    for bad, field in (({"utilisation_below": 120}, "utilisation_below"), ({"window_minutes": 0}, "window_minutes")):
        with pytest.raises(Exception) as error:
            policies.check_parameters(kind="low_load_power", parameters={**PARAMETERS, **bad}, nodes=nodes)
        assert field in error.value.detail


@pytest.mark.django_db(transaction=True)
def test_when_load_rises_above_restore_above_the_evaluation_restores_the_default(policy, operator, run_shards):
    action = applied(policies.dry_run(policy=policy, user=operator), run_shards, operator)
    assert "checking the limit still holds on 2 nodes" in policies.evaluate(
        policy=policy
    )  # the service's load is under 100 %: kept
    CostPolicy.objects.filter(pk=policy.pk).update(
        parameters={**PARAMETERS, "utilisation_below": 15, "restore_above": 20}
    )
    policy.refresh_from_db()

    outcome = policies.evaluate(policy=policy)
    action.refresh_from_db()
    assert "load rose" in outcome and action.state == ActionState.REVERTING and "above 20 %" in action.revert_reason
    run_shards(action.revert_job)
    assert limits("gpu001") == limits("gpu002") == {700}
