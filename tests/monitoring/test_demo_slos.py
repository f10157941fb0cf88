"""The demo opens on the brief's four SLOs: `load_demo_slos` adds them on the demo workloads (once), and the SLOs
page shows each with its budgets, from the simulator's telemetry in the embedded wiring."""

import datetime as dt

import pytest
from django.core.management import call_command
from django.utils import timezone

from apps.inventory.demo import ClusterShape, load_cluster
from apps.monitoring import services
from apps.monitoring.demo import DEMO_SLOS, load_slos
from apps.monitoring.models import Slo
from apps.workloads.demo import load_workloads
from apps.workloads.models import InferenceService

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(settings):
    settings.RACKPILOT_PROMETHEUS_URL = ""
    load_cluster(ClusterShape(compute_nodes=20, nodes_per_rack=10, management_nodes=0))
    load_workloads()


def test_the_four_criteria_are_added_once_on_the_demo_workloads(demo):
    call_command("load_demo_slos", verbosity=0)
    call_command("load_demo_slos", verbosity=0)

    rows = {row.name: row for row in Slo.objects.select_related("service", "training_job")}
    assert sorted(rows) == sorted(name for name, _, _ in DEMO_SLOS)
    assert {row.objective for row in rows.values()} == {
        "throughput",
        "latency_p99",
        "energy_per_mtok",
        "gpu_utilisation",
    }
    assert rows["chat-llama-70b-p99"].target == 100 and rows["chat-llama-70b-p99"].service.name == "chat-llama-70b"
    assert rows["llama-pretrain-utilisation"].training_job.name == "llama-pretrain"


def test_the_demo_given_its_month_counts_a_month_of_operating_hours_on_every_part(clock, demo):
    from apps.health.costs import mtbf
    from apps.inventory.models import Gpu

    load_slos()

    now = timezone.now()
    hours = {
        row["component_type"]: row["operating_hours"] for row in mtbf(since=now - dt.timedelta(days=30), until=now)
    }
    month = 30 * 24
    assert hours["node"] == pytest.approx(20 * month, rel=0.01)  # 20 nodes racked a month ago
    assert hours["gpu"] == pytest.approx(Gpu.objects.count() * month, rel=0.01)  # and their GPUs with them
    assert hours["switch"] > 0 and hours["cable"] > hours["node"]


def test_an_slo_whose_workload_is_missing_is_not_added(demo):
    InferenceService.objects.all().delete()

    assert load_slos() == 1
    assert list(Slo.objects.values_list("name", flat=True)) == ["llama-pretrain-utilisation"]


def test_the_slos_page_shows_each_with_its_budgets(demo, browser_as, viewer, record_telemetry):
    load_slos()
    record_telemetry()
    page = browser_as(viewer).get("/telemetry/slos/").content.decode()

    for name, _, _ in DEMO_SLOS:
        assert name in page
    assert "≤ 100 ms, 99 % of the time" in page  # the p99 SLO's target in words (was "100 · 0.9900")
    status = services.slo_status(Slo.objects.get(name="llama-pretrain-utilisation"), windows=("1h",))
    [budget] = status["budgets"]
    assert not status["error"] and budget.judged > 0 and status["latest"] is not None
