"""Failure costs with a set clock: a training job at step 4,250 with a checkpoint every 1,000 steps loses 250 steps
on all its GPUs; the node's drain, from the drain to its return, costs its GPUs' hours; the MTBF per component type
and the lemons ranked by GPU-hours lost. Time is passed in and the audit log's clock is set (`timezone.now`)."""

import datetime as dt
from unittest import mock

import pytest

from apps.health import costs
from apps.health import services as health
from apps.health.choices import ClearedBy, ComponentType, Severity, Source
from apps.inventory.services import drain_nodes, undrain_nodes
from apps.workloads.choices import TrainingState
from apps.workloads.models import TrainingJob, TrainingJobNode, TrainingProgress
from tests import factories

T0 = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


def at(moment):
    return mock.patch("django.utils.timezone.now", return_value=moment)


@pytest.fixture
def fleet(db):
    """Two 8-GPU nodes holding one training job (2 × 8 ranks), checkpointing every 1,000 steps at 2 s a step."""
    with at(T0 - dt.timedelta(days=30)):
        nodes = [factories.make_node(hostname=f"gpu{n:03d}") for n in (1, 2)]
        gpus = [
            factories.make_gpu(node=node, index=i, serial=f"SN-{node.hostname}-{i}") for node in nodes for i in range(8)
        ]
        job = TrainingJob.objects.create(
            name="llama",
            state=TrainingState.RUNNING,
            checkpoint_interval_steps=1000,
            started_at=T0 - dt.timedelta(days=1),
        )
        for rank, node in enumerate(nodes):
            TrainingJobNode.objects.create(job=job, node=node, node_rank=rank)
    for step, minutes in ((4000, 20), (4250, 1)):
        TrainingProgress.objects.create(
            job=job, step=step, time=T0 - dt.timedelta(minutes=minutes), seconds_per_step=2.0
        )
    return nodes, gpus, job


def xid(gpu, moment, kind="xid79"):
    return health.record_event(
        component=gpu, source=Source.TELEMETRY, kind=kind, severity=Severity.CRITICAL, summary="GPU fell off", at=moment
    )


def test_work_since_the_last_checkpoint_counts_on_all_the_jobs_gpus(fleet):
    nodes, gpus, job = fleet
    event = xid(gpus[3], T0)
    cost = costs.failure_cost(event, now=T0 + dt.timedelta(hours=1), slo=False)
    (loss,) = cost.losses
    # 250 steps × 2 s on 16 GPUs: 8,000 GPU-seconds.
    assert (loss.what, loss.gpus, loss.seconds) == ("work", 16, 500.0)
    assert cost.gpu_hours_lost == pytest.approx(500 * 16 / 3600)
    assert "250 steps since the checkpoint at step 4000" in loss.detail


def test_a_job_that_logged_nothing_for_a_checkpoint_interval_was_not_running(fleet):
    nodes, gpus, job = fleet
    late = T0 + dt.timedelta(seconds=1000 * 2 + 120)  # past one interval (2,000 s) after the last step
    assert costs.failure_cost(xid(gpus[0], late), now=late, slo=False).losses == []


def test_the_drain_costs_the_nodes_gpus_until_its_return_and_until_now_while_drained(fleet):
    nodes, gpus, job = fleet
    event = xid(gpus[3], T0)
    with at(T0 + dt.timedelta(minutes=5)):
        drain_nodes(nodes=[nodes[0]], reason="rackpilot xid79: GPU fell off", since=T0 + dt.timedelta(minutes=5))
    # Still drained: counted to now.
    open_cost = costs.failure_cost(event, now=T0 + dt.timedelta(hours=2, minutes=5), slo=False)
    (quarantine,) = open_cost.quarantine
    assert (quarantine.gpus, quarantine.seconds) == (8, 7200.0)
    with at(T0 + dt.timedelta(hours=3, minutes=5)):
        undrain_nodes(nodes=[nodes[0]])
    cost = costs.failure_cost(event, now=T0 + dt.timedelta(days=2), slo=False)
    (quarantine,) = cost.quarantine
    assert quarantine.seconds == 3 * 3600 and quarantine.gpu_hours == 24.0
    assert cost.gpu_hours_lost == pytest.approx(24.0 + 500 * 16 / 3600)
    assert cost.slo is None  # nothing registered and not asked: not measured


def test_a_drain_named_for_one_kind_is_not_charged_to_another_and_totals_count_a_loss_once(fleet):
    nodes, gpus, job = fleet
    first, second = xid(gpus[3], T0), xid(gpus[4], T0, kind="ecc_uncorrectable")
    with at(T0 + dt.timedelta(minutes=5)):
        drain_nodes(nodes=[nodes[0]], reason="rackpilot xid79: GPU fell off", since=T0 + dt.timedelta(minutes=5))
    found = costs.failure_costs([first, second], now=T0 + dt.timedelta(hours=1, minutes=5))
    assert len(found[first.pk].quarantine) == 1 and found[second.pk].quarantine == []
    # Both lost the same job's work since the same checkpoint: counted once in the total.
    assert costs.total_gpu_hours(found.values()) == pytest.approx(8.0 + 500 * 16 / 3600)


def test_mtbf_is_operating_hours_over_failures_per_component_type(fleet):
    nodes, gpus, job = fleet
    since, until = T0 - dt.timedelta(days=10), T0 + dt.timedelta(days=10)
    xid(gpus[0], T0)
    event = xid(gpus[1], T0 + dt.timedelta(days=1))
    health.clear_event(event=event, by=ClearedBy.OPERATOR, reason="reseated")
    xid(gpus[1], T0 + dt.timedelta(days=2))  # back: a second failure of the same GPU
    health.record_event(
        component=gpus[2], source=Source.TELEMETRY, kind="xid13", severity=Severity.MINOR, summary="app", at=T0
    )  # minor: not a failure
    rows = {row["component_type"]: row for row in costs.mtbf(since=since, until=until)}
    assert rows[ComponentType.GPU]["failures"] == 3
    assert rows[ComponentType.GPU]["operating_hours"] == pytest.approx(16 * 20 * 24)
    assert rows[ComponentType.GPU]["mtbf_hours"] == pytest.approx(16 * 20 * 24 / 3)
    assert rows[ComponentType.NODE]["failures"] == 0 and rows[ComponentType.NODE]["mtbf_hours"] is None
    assert rows[ComponentType.SWITCH_PORT]["operating_hours"] is None


def test_lemons_rank_nodes_and_parts_by_gpu_hours_lost_then_failures(fleet):
    nodes, gpus, job = fleet
    since, until = T0 - dt.timedelta(days=1), T0 + dt.timedelta(days=1)
    xid(gpus[9], T0 - dt.timedelta(hours=5))  # gpu002, job not running yet by its log: no work lost
    health.clear_event(event=xid(gpus[8], T0 - dt.timedelta(hours=6)), by=ClearedBy.OPERATOR, reason="x")
    xid(gpus[3], T0)  # gpu001 with the job's 250 steps lost
    found = costs.lemons(since=since, until=until)
    assert [row["node"].hostname for row in found["nodes"]] == ["gpu001", "gpu002"]
    assert found["nodes"][0]["gpu_hours_lost"] == pytest.approx(500 * 16 / 3600)
    assert found["nodes"][1]["failures"] == 2
    assert found["parts"][0]["serial"] == "SN-gpu001-3"
    assert {row["serial"] for row in found["parts"][1:]} == {"SN-gpu002-0", "SN-gpu002-1"}


def test_the_reliability_page_selects_the_window_it_counts(fleet, browser_as, viewer):
    """With no window asked, the page counts the default (30 d) and its select says so (it showed 7d)."""
    page = browser_as(viewer).get("/health/reliability/").content.decode()

    assert "(30d)" in page and '<option value="30d" selected>' in page
    assert (
        '<option value="7d" selected>'
        in browser_as(viewer).get("/health/reliability/", {"window": "7d"}).content.decode()
    )
