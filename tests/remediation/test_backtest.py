"""Back-testing a policy change on the demo cluster: the recorded events and a simulated fault campaign replayed
through the production evaluator for the policies in force and for the candidate; a correlated leaf failure trips
one side's breaker (naming the leaf) and not the other's; the replay leaves no decision, job, drain, event or audit
entry behind. Time is passed in, never read."""

import datetime as dt

import pytest

from apps.core.models import AuditEntry
from apps.health import services as health
from apps.health.choices import ClearedBy, Severity, Source
from apps.health.models import HealthEvent
from apps.inventory.models import Gpu, Node
from apps.jobs.models import Job
from apps.remediation import campaign as campaigns
from apps.remediation import services
from apps.remediation.backtest import BacktestRefused, backtest
from apps.remediation.choices import Action, Mode
from apps.remediation.models import RemediationDecision, RemediationPolicy

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
SINCE, UNTIL = NOW - dt.timedelta(days=1), NOW + dt.timedelta(days=1)


@pytest.fixture
def slurm(settings, demo_cluster):
    settings.RACKPILOT_SCHEDULER_KIND = "slurm"


def leaf_mates(count: int) -> list[str]:
    first = Node.objects.get(hostname="gpu001")
    leaf = services.shared_leaf([first])
    nodes = Node.objects.filter(role="compute").order_by("hostname")
    return [n.hostname for n in nodes if services.shared_leaf([first, n]) == leaf][:count]


def in_force(**fields) -> RemediationPolicy:
    RemediationPolicy.objects.all().delete()
    values = {
        "name": "xid79", "kind_pattern": "xid79", "min_severity": Severity.CRITICAL, "action": Action.QUARANTINE,
        "mode": Mode.ON, "breaker_max_nodes": 32, "breaker_max_percent": 100, "breaker_window_minutes": 60,
    }  # fmt: skip
    return RemediationPolicy.objects.create(**(values | fields))


def the_state() -> tuple:
    return (
        RemediationDecision.objects.count(),
        Job.objects.count(),
        Node.objects.filter(drained_at__isnull=False).count(),
        sorted(HealthEvent.objects.values_list("pk", "cleared_at")),
        sorted(RemediationPolicy.objects.values_list("pk", "breaker_max_nodes", "mode")),
        AuditEntry.objects.count(),
    )


def test_a_tighter_breaker_trips_on_a_leaf_failure_where_the_policy_in_force_does_not(slurm):
    policy = in_force()
    hosts = leaf_mates(5)
    for minute, host in enumerate(hosts):
        health.record_event(
            component=Gpu.objects.get(node__hostname=host, index=1),
            source=Source.TELEMETRY,
            kind="xid79",
            severity=Severity.CRITICAL,
            summary="GPU 1: XID 79",
            at=NOW + dt.timedelta(minutes=minute),
        )
    before = the_state()
    candidate = RemediationPolicy.objects.get(pk=policy.pk)
    candidate.breaker_max_nodes = 2
    (replay,) = backtest([candidate], since=SINCE, until=UNTIL).replays
    assert replay.source == "recorded" and replay.events == 5
    assert (replay.in_force.quarantines, replay.in_force.breaker_trips) == (5, [])
    assert replay.candidate.quarantines == 2
    leaf = services.shared_leaf(list(Node.objects.filter(hostname__in=hosts)))
    assert [trip["cause"] for trip in replay.candidate.breaker_trips] == [leaf] * 3
    assert [trip["node"] for trip in replay.candidate.breaker_trips] == hosts[2:]
    # Drained to the window's end (nothing cleared): 5 nodes × 8 GPUs against 2.
    assert replay.in_force.quarantine_gpu_hours > replay.candidate.quarantine_gpu_hours > 0
    assert the_state() == before  # no decision, job, drain, event change, policy change or audit entry left
    assert RemediationPolicy.objects.get(pk=policy.pk).breaker_max_nodes == 32


def test_a_new_candidate_stays_unsaved_and_a_fault_back_after_validation_is_a_false_escalation(slurm):
    in_force(kind_pattern="ecc_uncorrectable")  # in force: nothing for an XID
    gpu = Gpu.objects.get(node__hostname="gpu003", index=0)
    first = health.record_event(
        component=gpu, source=Source.TELEMETRY, kind="xid79", severity=Severity.CRITICAL, summary="x", at=NOW
    )
    health.clear_event(event=first, by=ClearedBy.VALIDATION, reason="burn-in passed", at=NOW + dt.timedelta(hours=1))
    second = health.record_event(
        component=gpu, source=Source.TELEMETRY, kind="xid79", severity=Severity.CRITICAL, summary="x",
        at=NOW + dt.timedelta(hours=2),
    )  # fmt: skip
    health.clear_event(event=second, by=ClearedBy.VALIDATION, reason="burn-in passed", at=NOW + dt.timedelta(hours=3))
    candidate = RemediationPolicy(
        name="reboot xid79", kind_pattern="xid*", min_severity=Severity.CRITICAL, action=Action.REBOOT, mode=Mode.SHADOW
    )
    before = the_state()
    (replay,) = backtest([candidate], since=SINCE, until=UNTIL).replays
    assert candidate.pk is None and candidate._state.adding
    reboot = [row for row in replay.candidate.decisions if row["policy"] == "reboot xid79"]
    assert [(row["action"], row["escalated"]) for row in reboot] == [("reboot", False), ("quarantine", True)]
    assert replay.candidate.escalations == 1 and replay.candidate.false_escalations == 1
    assert (replay.in_force.escalations, replay.in_force.decisions) == (0, [])
    assert the_state() == before


def test_the_campaign_is_seeded_and_its_leaf_failure_trips_only_the_tight_breaker(slurm):
    first = campaigns.generate(since=SINCE, until=UNTIL, seed=7)
    assert [(f.kind, f.first_seen) for f in first] == [
        (f.kind, f.first_seen) for f in campaigns.generate(since=SINCE, until=UNTIL, seed=7)
    ]
    switch, nics = campaigns.leaf_nodes()
    assert sum(f.kind == "link_down" for f in first) == len(nics) > 4
    in_force(name="link down", kind_pattern="link_down")
    candidate = RemediationPolicy.objects.get(name="link down")
    candidate.breaker_max_nodes = 4
    before = the_state()
    recorded, simulated = backtest([candidate], since=SINCE, until=UNTIL, campaign=7).replays
    assert (recorded.events, simulated.source, simulated.events) == (0, "campaign", len(first))
    assert simulated.in_force.breaker_trips == [] and simulated.in_force.quarantines == len(nics)
    assert simulated.candidate.quarantines == 4
    # The nodes share both planes' leaves of their rack: the cause names them, the one down among them.
    (cause,) = {trip["cause"] for trip in simulated.candidate.breaker_trips}
    assert switch.name in cause.split(", ")
    assert len(simulated.candidate.breaker_trips) == len(nics) - 4
    assert the_state() == before and not HealthEvent.objects.exists()


def test_a_window_backwards_or_too_long_is_refused_naming_the_field(db):
    with pytest.raises(BacktestRefused) as refused:
        backtest([RemediationPolicy(name="x")], since=UNTIL, until=SINCE)
    assert "until" in refused.value.errors
    with pytest.raises(BacktestRefused) as refused:
        backtest([], since=NOW - dt.timedelta(days=400), until=NOW)
    assert set(refused.value.errors) == {"since", "policies"}
