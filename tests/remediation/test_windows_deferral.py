"""Deferral into maintenance windows: an "on" quarantine for a fault below critical on a node whose rack (or the node)
has a window opening within the horizon is deferred into it, naming the window, and runs when the window opens; a
critical fault acts at once; shadow records "Would defer into …"; a window deleted before it opens has its deferred
action decided again; an event cleared meanwhile is not acted on. Time is passed in (`now=`), never read."""

import datetime as dt

import pytest

from apps.health import services as health
from apps.health.choices import ClearedBy, Severity, Source
from apps.inventory.models import Gpu, Node
from apps.jobs.models import Job
from apps.remediation import checkpoint, services
from apps.remediation.choices import Action, Mode, Outcome
from apps.remediation.models import MaintenanceWindow, RemediationDecision, RemediationPolicy

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)


@pytest.fixture(autouse=True)
def slurm(settings, demo_cluster):
    settings.RACKPILOT_SCHEDULER_KIND = "slurm"
    settings.RACKPILOT_MAINTENANCE_DEFER_HOURS = 72


def policy(**fields) -> RemediationPolicy:
    RemediationPolicy.objects.all().delete()  # the shipped defaults step aside for the policy under test
    values = {
        "name": "ecc", "kind_pattern": "ecc_uncorrectable", "min_severity": Severity.MINOR,
        "action": Action.QUARANTINE, "mode": Mode.ON,
    }  # fmt: skip
    return RemediationPolicy.objects.create(**(values | fields))


def ecc(hostname: str, *, severity: str = Severity.MAJOR, at: dt.datetime = NOW):
    return health.record_event(
        component=Gpu.objects.get(node__hostname=hostname, index=2), source=Source.TELEMETRY,
        kind="ecc_uncorrectable", severity=severity, summary="GPU 2: uncorrectable ECC errors", at=at,
    )  # fmt: skip


def window_on_rack(hostname: str, *, starts: dt.datetime, hours: int = 4, reason: str = "psu swap"):
    rack = Node.objects.get(hostname=hostname).rack
    return MaintenanceWindow.objects.create(rack=rack, starts=starts, ends=starts + hours * HOUR, reason=reason)


def test_a_major_fault_is_deferred_into_the_racks_next_window_and_drained_when_it_opens():
    policy()
    window = window_on_rack("gpu005", starts=NOW + 10 * HOUR)
    ecc("gpu005")
    (decision,) = services.evaluate(now=NOW, transport="sim", queue=False)
    assert decision.outcome == Outcome.DEFERRED and decision.window == window
    assert decision.act_at == window.starts
    rack = Node.objects.get(hostname="gpu005").rack.name
    assert decision.reason.startswith(
        f"Deferred into the maintenance window on rack {rack} from 2026-12-01T22:00+00:00 to 2026-12-02T02:00+00:00 "
        "(psu swap), then drain gpu005 through the scheduler"
    )
    assert not Job.objects.exists() and not Node.objects.get(hostname="gpu005").is_drained

    # Before the window opens nothing runs, and the checkpoint-aware settle leaves it alone (it has no training job).
    assert services.settle_deferred(now=NOW + 9 * HOUR, transport="sim", queue=False) == []
    assert RemediationDecision.objects.get(pk=decision.pk).outcome == Outcome.DEFERRED
    assert checkpoint.settle(now=NOW + 9 * HOUR, act=pytest.fail) == []

    (settled,) = services.settle_deferred(now=NOW + 10 * HOUR + dt.timedelta(minutes=1), transport="sim", queue=False)
    settled.refresh_from_db()
    assert settled.pk == decision.pk and settled.outcome == Outcome.ACTED, settled.reason
    assert settled.reason.startswith(f"In the maintenance window on rack {rack}")
    assert "Started: drain gpu005 through the scheduler" in settled.reason and settled.job_id is not None
    assert Node.objects.get(hostname="gpu005").is_drained
    assert settled.window == window and settled.decided_at == NOW  # when it was decided stays as recorded
    # Settled once: the next pass has nothing to do.
    assert services.settle_deferred(now=NOW + 11 * HOUR, transport="sim", queue=False) == []


def test_a_critical_fault_acts_at_once_whatever_window_is_booked():
    policy()
    window_on_rack("gpu005", starts=NOW + HOUR)
    ecc("gpu005", severity=Severity.CRITICAL)
    (decision,) = services.evaluate(now=NOW, transport="sim", queue=False)
    assert decision.outcome == Outcome.ACTED and decision.window is None and decision.act_at is None
    assert decision.reason.startswith("Started: drain gpu005")
    assert Node.objects.get(hostname="gpu005").is_drained


def test_a_window_beyond_the_horizon_or_on_another_rack_defers_nothing(settings):
    settings.RACKPILOT_MAINTENANCE_DEFER_HOURS = 24
    policy()
    window_on_rack("gpu005", starts=NOW + 30 * HOUR)
    other = next(node for node in Node.objects.exclude(rack=Node.objects.get(hostname="gpu005").rack))
    window_on_rack(other.hostname, starts=NOW + HOUR)
    ecc("gpu005")
    (decision,) = services.evaluate(now=NOW, transport="sim", queue=False)
    assert decision.outcome == Outcome.ACTED and decision.window is None


def test_a_window_on_the_node_itself_defers_and_notify_is_never_deferred():
    policy(action=Action.NOTIFY)
    node = Node.objects.get(hostname="gpu006")
    MaintenanceWindow.objects.create(node=node, starts=NOW + HOUR, ends=NOW + 2 * HOUR, reason="reseat GPU 2")
    ecc("gpu006")
    (notice,) = services.evaluate(now=NOW, transport="sim", queue=False)
    assert notice.outcome == Outcome.ACTED and notice.window is None

    policy(action=Action.REBOOT)
    (reboot,) = services.evaluate(now=NOW, transport="sim", queue=False)
    assert (
        reboot.outcome == Outcome.DEFERRED and "on gpu006 from" in reboot.reason and "(reseat GPU 2)" in reboot.reason
    )


def test_shadow_records_that_it_would_defer_and_nothing_settles_it():
    policy(mode=Mode.SHADOW)
    window = window_on_rack("gpu005", starts=NOW + 10 * HOUR)
    ecc("gpu005")
    (decision,) = services.evaluate(now=NOW, transport="sim", queue=False)
    assert decision.outcome == Outcome.WOULD_ACT and decision.window == window
    assert decision.reason.startswith("Would defer into the maintenance window on rack")
    assert "then drain gpu005 through the scheduler" in decision.reason
    assert services.settle_deferred(now=NOW + 11 * HOUR, transport="sim", queue=False) == []
    assert not Job.objects.exists()


def test_a_fault_first_decided_in_an_open_window_is_refused_but_what_was_booked_into_it_runs():
    policy()
    window = window_on_rack("gpu005", starts=NOW + HOUR)
    ecc("gpu005")
    (booked,) = services.evaluate(now=NOW, transport="sim", queue=False)
    assert booked.outcome == Outcome.DEFERRED
    ecc("gpu007", at=NOW + 2 * HOUR)
    MaintenanceWindow.objects.create(
        node=Node.objects.get(hostname="gpu007"), starts=NOW + HOUR, ends=NOW + 3 * HOUR, reason="cabling"
    )
    (refused,) = services.evaluate(now=NOW + 2 * HOUR, transport="sim", queue=False)
    assert refused.outcome == Outcome.REFUSED and "is in a maintenance window" in refused.reason
    (settled,) = services.settle_deferred(now=NOW + 2 * HOUR, transport="sim", queue=False)
    assert settled.pk == booked.pk and settled.outcome == Outcome.ACTED and settled.window == window


def test_a_window_deleted_before_it_opens_has_its_action_decided_again():
    policy()
    window = window_on_rack("gpu005", starts=NOW + 10 * HOUR)
    later = window_on_rack("gpu005", starts=NOW + 30 * HOUR, reason="firmware")
    ecc("gpu005")
    (decision,) = services.evaluate(now=NOW, transport="sim", queue=False)
    assert decision.window == window
    window.delete()
    # Decided again at the next pass: into the next window still booked.
    (again,) = services.settle_deferred(now=NOW + HOUR, transport="sim", queue=False)
    again.refresh_from_db()
    assert again.pk == decision.pk and again.outcome == Outcome.DEFERRED and again.window == later
    assert again.reason.startswith("Its maintenance window was deleted before it ran; decided again: Deferred into")
    assert "(firmware)" in again.reason and again.attempt == 1  # not counted against itself
    # That one deleted too, with none left: it acts at once.
    later.delete()
    (acted,) = services.settle_deferred(now=NOW + 2 * HOUR, transport="sim", queue=False)
    acted.refresh_from_db()
    assert acted.outcome == Outcome.ACTED and acted.window is None and acted.job_id is not None
    assert Node.objects.get(hostname="gpu005").is_drained


def test_an_event_cleared_before_the_window_opens_is_not_acted_on():
    policy()
    window_on_rack("gpu005", starts=NOW + 10 * HOUR)
    event = ecc("gpu005")
    (decision,) = services.evaluate(now=NOW, transport="sim", queue=False)
    health.clear_event(event=event, by=ClearedBy.OPERATOR, reason="GPU reseated", at=NOW + HOUR)
    (settled,) = services.settle_deferred(now=NOW + 11 * HOUR, transport="sim", queue=False)
    settled.refresh_from_db()
    assert settled.outcome == Outcome.REFUSED and settled.reason.startswith("Not done: its event was cleared")
    assert not Job.objects.exists() and not Node.objects.get(hostname="gpu005").is_drained
