"""The remediation evaluator on the demo cluster: a shadow policy records what it would do and drains nothing; an
"on" quarantine drains through the scheduler-action job on the simulated Slurm controller; the circuit breaker stops
at its limit and names the leaf switch the nodes share; a fault back after its action escalates; nothing is decided
twice. Time is passed in (`now=`), never read."""

import datetime as dt

import pytest

from apps.core.choices import ChangeSource
from apps.core.models import AuditEntry
from apps.health import services as health
from apps.health.choices import ClearedBy, Severity, Source
from apps.inventory.models import Gpu, Node
from apps.jobs.choices import JobStatus
from apps.jobs.models import Job
from apps.remediation import services
from apps.remediation.choices import Action, Mode, Outcome
from apps.remediation.defaults import ship_defaults
from apps.remediation.models import MaintenanceWindow, RemediationDecision, RemediationPolicy
from apps.schedulers.models import SchedulerNodeState
from apps.simulator.services import run_command

pytestmark = pytest.mark.django_db(transaction=True)

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


def xid79(hostname: str, at: dt.datetime = NOW, gpu: int = 2):
    return health.record_event(
        component=Gpu.objects.get(node__hostname=hostname, index=gpu),
        source=Source.TELEMETRY,
        kind="xid79",
        severity=Severity.CRITICAL,
        summary=f"GPU {gpu}: XID 79, GPU has fallen off the bus",
        at=at,
    )


@pytest.fixture
def slurm(settings, demo_cluster):
    settings.RACKPILOT_SCHEDULER_KIND = "slurm"


def policy(**fields) -> RemediationPolicy:
    RemediationPolicy.objects.all().delete()  # the shipped defaults step aside for the policy under test
    values = {"name": "xid79", "kind_pattern": "xid79", "min_severity": Severity.CRITICAL, "action": Action.QUARANTINE}
    return RemediationPolicy.objects.create(**(values | fields))


def slurm_says(hostname: str) -> str:
    controller = services.scheduler_request(Node.objects.get(hostname=hostname))["controller"]
    answer = run_command(node=controller, argv=["scontrol", "show", "node", "-o", hostname])
    return answer.stdout


def test_the_evaluator_is_one_of_the_periodic_tasks(settings):
    assert settings.RACKPILOT_PERIODIC_TASKS["rackpilot.remediation.evaluate"] == 60


def test_the_shipped_defaults_quarantine_xid79_in_shadow_and_notify_a_degraded_link(db):
    ship_defaults(RemediationPolicy)  # what the first migration runs (a transactional test's flush removes its rows)
    shipped = {p.kind_pattern: (p.action, p.mode) for p in RemediationPolicy.objects.all()}
    assert shipped["xid79"] == (Action.QUARANTINE, Mode.SHADOW)
    assert shipped["ecc_uncorrectable"] == (Action.QUARANTINE, Mode.SHADOW)
    assert shipped["link_degraded"][0] == Action.NOTIFY


def test_a_shadow_policy_records_what_it_would_do_and_drains_nothing(slurm):
    policy(mode=Mode.SHADOW)
    event = xid79("gpu005")
    (decision,) = services.evaluate(now=NOW, transport="sim", queue=False)
    assert (decision.event, decision.mode, decision.action, decision.outcome) == (
        event, Mode.SHADOW, Action.QUARANTINE, Outcome.WOULD_ACT,
    )  # fmt: skip
    assert decision.reason.startswith("Would drain gpu005 through the scheduler")
    assert decision.job_id is None and not Job.objects.exists()
    assert not Node.objects.get(hostname="gpu005").is_drained
    assert "DRAIN" not in slurm_says("gpu005")
    # Evaluated again: nothing new, never twice for the same event.
    assert services.evaluate(now=NOW + dt.timedelta(minutes=1), transport="sim", queue=False) == []
    assert RemediationDecision.objects.count() == 1


def test_an_on_quarantine_drains_through_the_simulated_slurm_controller(slurm, run_shards):
    policy(mode=Mode.ON)
    xid79("gpu006")
    (decision,) = services.evaluate(now=NOW, transport="sim", queue=False)
    assert decision.outcome == Outcome.ACTED and decision.job_id is not None
    job = run_shards(Job.objects.get(public_id=decision.job_id))
    assert (job.kind, job.parameters["action"], job.parameters["node"]) == ("scheduler-action", "drain", "gpu006")
    assert job.status == JobStatus.SUCCEEDED, list(job.steps.values_list("step", "summary"))
    reason = "rackpilot xid79: GPU 2: XID 79, GPU has fallen off the bus"
    node = Node.objects.get(hostname="gpu006")
    assert node.is_drained and node.drain_reason == reason
    assert "DRAIN" in slurm_says("gpu006") and f"Reason={reason}" in slurm_says("gpu006")
    assert SchedulerNodeState.objects.get(node=node).reason == reason
    assert decision.reason.startswith("Started: drain gpu006 through the scheduler")
    drained = AuditEntry.objects.for_object(node).filter(source=ChangeSource.SYSTEM).latest("created")
    assert drained.changes["drain_reason"][1] == reason  # the drain is in the audit log, as the system's
    assert AuditEntry.objects.for_object(decision).exists()
    assert services.evaluate(now=NOW + dt.timedelta(minutes=5), transport="sim", queue=False) == []
    assert Job.objects.filter(kind="scheduler-action").count() == 1  # never acted twice
    # The quarantine opened the node's repair and started capturing its evidence, before anything reboots it.
    assert Job.objects.filter(kind="repair-evidence").count() == 1


def leaf_mates(count: int) -> list[str]:
    """Compute nodes cabled to one leaf switch (the demo's racks each have their own)."""
    first = Node.objects.get(hostname="gpu001")
    leaf = services.shared_leaf([first])
    assert leaf
    mates = [n.hostname for n in Node.objects.filter(role="compute").order_by("hostname") if services.shared_leaf(
        [first, n]) == leaf]  # fmt: skip
    return mates[:count]


def test_the_breaker_stops_at_its_limit_and_names_the_shared_leaf(slurm):
    policy(mode=Mode.ON, breaker_max_nodes=2, breaker_max_percent=100, breaker_window_minutes=30)
    hosts = leaf_mates(3)
    for minute, host in enumerate(hosts):
        xid79(host, at=NOW + dt.timedelta(minutes=minute))
    decisions = services.evaluate(now=NOW + dt.timedelta(minutes=5), transport="sim", queue=False)
    assert [d.outcome for d in decisions] == [Outcome.ACTED, Outcome.ACTED, Outcome.REFUSED]
    refused = decisions[2]
    assert refused.reason.startswith("Circuit breaker tripped: 2 nodes already taken out by automation in 30 min")
    assert f"behind leaf switch {services.shared_leaf([Node.objects.get(hostname=hosts[0])])}" in refused.reason
    assert not Node.objects.get(hostname=hosts[2]).is_drained
    assert Job.objects.filter(kind="scheduler-action").count() == 2

    # Past the window the breaker lets the next fault through.
    xid79("gpu020", at=NOW + dt.timedelta(minutes=40))
    (later,) = services.evaluate(now=NOW + dt.timedelta(minutes=41), transport="sim", queue=False)
    assert later.outcome == Outcome.ACTED


def test_a_breaker_over_nodes_on_different_leaves_names_no_switch(slurm):
    policy(breaker_max_nodes=1, breaker_max_percent=100)  # shadow counts its own would-be quarantines
    xid79("gpu001")
    xid79("gpu032", at=NOW + dt.timedelta(seconds=1))
    first, second = services.evaluate(now=NOW + dt.timedelta(minutes=1), transport="sim", queue=False)
    assert (first.outcome, second.outcome) == (Outcome.WOULD_ACT, Outcome.REFUSED)
    assert "Circuit breaker tripped" in second.reason and "leaf switch" not in second.reason


def test_a_fault_back_after_its_reboot_escalates_to_quarantine_and_repair_then_stops(slurm):
    policy(action=Action.REBOOT, mode=Mode.SHADOW, max_attempts=1)
    outcomes = []
    for hour in range(3):
        at = NOW + dt.timedelta(hours=hour)
        event = xid79("gpu007", at=at)
        (decision,) = services.evaluate(now=at, transport="sim", queue=False)
        outcomes.append((decision.action, decision.escalated, decision.opens_repair, decision.outcome))
        health.clear_event(event=event, by=ClearedBy.OPERATOR, reason="rebooted", at=at + dt.timedelta(minutes=10))
    assert outcomes == [
        (Action.REBOOT, False, False, Outcome.WOULD_ACT),
        (Action.QUARANTINE, True, True, Outcome.WOULD_ACT),
        (Action.QUARANTINE, True, True, Outcome.REFUSED),
    ]
    assert RemediationDecision.objects.order_by("decided_at").last().reason.startswith("Cap reached: 2 actions")


def test_an_on_quarantine_without_a_controller_changes_nothing(slurm, settings):
    settings.RACKPILOT_SCHEDULER_CONTROLLER = "no-such-host"
    policy(mode=Mode.ON)
    xid79("gpu008")
    (decision,) = services.evaluate(now=NOW, transport="sim", queue=False)
    assert decision.outcome == Outcome.FAILED and "nothing changed" in decision.reason
    assert not Node.objects.get(hostname="gpu008").is_drained and not Job.objects.exists()


def test_events_below_the_policys_severity_or_of_another_kind_are_left_alone(slurm):
    policy(mode=Mode.ON)
    health.record_event(
        component=Gpu.objects.get(node__hostname="gpu009", index=0), source=Source.TELEMETRY, kind="xid48",
        severity=Severity.CRITICAL, summary="GPU 0: XID 48", at=NOW,
    )  # fmt: skip
    xid79("gpu009", gpu=1)
    health.record_event(
        component=Gpu.objects.get(node__hostname="gpu009", index=1),
        source=Source.TELEMETRY,
        kind="xid79",
        severity=Severity.MAJOR,
        summary="GPU 1: XID 79",
        at=NOW,
    )  # fmt: skip  (the open event keeps the worse severity: still critical)
    health.record_event(
        component=Gpu.objects.get(node__hostname="gpu011", index=1), source=Source.TELEMETRY, kind="xid79",
        severity=Severity.MAJOR, summary="GPU 1: XID 79", at=NOW,
    )  # fmt: skip
    (decision,) = services.evaluate(now=NOW, transport="sim", queue=False)
    assert decision.node.hostname == "gpu009"  # gpu011's major event is below the policy's critical


def test_a_node_in_a_maintenance_window_is_left_to_the_people_working_on_it(slurm):
    policy(mode=Mode.ON)
    node = Node.objects.get(hostname="gpu012")
    MaintenanceWindow.objects.create(
        rack=node.rack, starts=NOW - dt.timedelta(hours=1), ends=NOW + dt.timedelta(hours=1), reason="PDU swap"
    )
    xid79("gpu012")
    (decision,) = services.evaluate(now=NOW, transport="sim", queue=False)
    assert decision.outcome == Outcome.REFUSED and "maintenance window" in decision.reason
    assert "PDU swap" in decision.reason and not Job.objects.exists()
    assert not Node.objects.get(hostname="gpu012").is_drained
    # After the window, a new fault on the node is acted on.
    xid79("gpu012", at=NOW + dt.timedelta(hours=2), gpu=3)
    (later,) = services.evaluate(now=NOW + dt.timedelta(hours=2), transport="sim", queue=False)
    assert later.outcome == Outcome.ACTED


def test_a_policy_turned_on_acts_on_the_open_events_it_decided_only_in_shadow_once(slurm):
    xid = policy(mode=Mode.SHADOW, breaker_max_percent=100)
    canary, other = Node.objects.get(hostname="gpu006"), Node.objects.get(hostname="gpu030")
    assert canary.rack_id != other.rack_id
    first, second = xid79("gpu006"), xid79("gpu030", at=NOW + dt.timedelta(seconds=1))
    shadowed = services.evaluate(now=NOW + dt.timedelta(seconds=30), transport="sim", queue=False)
    assert [d.outcome for d in shadowed] == [Outcome.WOULD_ACT] * 2

    # On for gpu006's rack (the canary): its open XID is decided again, for real; gpu030 stays decided in shadow.
    xid.mode = Mode.ON
    xid.save()
    xid.canary_racks.set([canary.rack])
    (acted,) = services.evaluate(now=NOW + dt.timedelta(minutes=1), transport="sim", queue=False)
    assert (acted.event, acted.mode, acted.outcome, acted.attempt) == (first, Mode.ON, Outcome.ACTED, 1)
    assert acted.job_id and Node.objects.get(hostname="gpu006").is_drained
    assert services.evaluate(now=NOW + dt.timedelta(minutes=2), transport="sim", queue=False) == []

    # On for the fleet: gpu030's XID now; then nothing is decided or done twice, nor again in shadow.
    xid.canary_racks.clear()
    (fleet,) = services.evaluate(now=NOW + dt.timedelta(minutes=3), transport="sim", queue=False)
    assert (fleet.event, fleet.mode, fleet.outcome) == (second, Mode.ON, Outcome.ACTED)
    assert services.evaluate(now=NOW + dt.timedelta(minutes=4), transport="sim", queue=False) == []
    xid.mode = Mode.SHADOW
    xid.save()
    assert services.evaluate(now=NOW + dt.timedelta(minutes=5), transport="sim", queue=False) == []
    assert Job.objects.filter(kind="scheduler-action").count() == 2
    assert RemediationDecision.objects.filter(mode=Mode.ON).count() == 2
    assert RemediationDecision.objects.filter(mode=Mode.SHADOW).count() == 2
