"""SLO blame: a missed SLO names the nodes and GPUs that drag it (their share of tokens/s or the utilisation points
they cost), their open incidents (read through diagnosis's services) and failing benchmark pairs; on the SLO page and
in GET /api/slos/{id}/status/. And the 30-day window beside 1 h, 24 h and 7 d."""

import datetime as dt

import pytest
from django.utils import timezone

from apps.benchmarks.models import BenchmarkTest
from apps.diagnosis.models import Incident
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node
from apps.jobs.models import Job
from apps.monitoring import services
from apps.monitoring.models import Slo, SloBlame
from apps.simulator import services as simulator
from apps.simulator.models import SimFault
from apps.workloads.models import InferenceService

pytestmark = pytest.mark.django_db


@pytest.fixture
def chat(clock, db):
    """A service on four nodes, running for the last two hours; gpu003 a straggler for the last hour."""
    load_cluster(ClusterShape(compute_nodes=4, nodes_per_rack=4, management_nodes=0))
    service = InferenceService.objects.create(name="chat", model="m", design_tokens_per_second=8000)
    service.nodes.set(Node.objects.all())
    two_hours_ago = timezone.now() - dt.timedelta(hours=2)
    InferenceService.objects.update(created=two_hours_ago)
    Node.objects.update(created=two_hours_ago - dt.timedelta(hours=1))
    slow = Node.objects.get(hostname="gpu003")
    simulator.inject_fault(node=slow, kind="straggler", target="", parameters={"sm_clock_mhz": 600})
    SimFault.objects.update(created=timezone.now() - dt.timedelta(hours=1, minutes=5))
    return InferenceService.objects.get()


def _failing_pair(a: str, b: str, verdict: str = "fail") -> BenchmarkTest:
    job = Job.objects.create(kind="nccl-tests", transport="sim")
    return BenchmarkTest.objects.create(
        job=job,
        launcher=a,
        hosts=[a, b],
        hosts_key=",".join(sorted([a, b])),
        collective="all_reduce",
        busbw_gb_per_s=120.0,
        expected_gb_per_s=380.0,
        verdict=verdict,
    )


def test_a_throughput_miss_blames_the_straggler_with_its_incident_and_failing_pair(chat, record_telemetry):
    slo = Slo.objects.create(name="chat-tps", objective="throughput", scope="service", service=chat, target=99)
    slow = Node.objects.get(hostname="gpu003")
    incident = Incident.objects.create(title="NCCL timeout on gpu003", node=slow)
    Incident.objects.create(title="resolved long ago", node=slow, state="resolved")
    _failing_pair("gpu003", "gpu004")
    _failing_pair("gpu001", "gpu002", verdict="pass")
    record_telemetry()

    status = services.slo_status(slo)

    assert not status["error"]
    assert [b.window for b in status["budgets"]] == ["1h", "24h", "7d", "30d"]
    first = status["draggers"][0]
    assert first["node"].hostname == "gpu003"
    assert first["drag_unit"] == "tokens/s" and first["drag"] > 0
    others = [d for d in status["draggers"] if d["node"].hostname != "gpu003"]
    assert all(first["tokens_per_second"] < d["tokens_per_second"] for d in others)
    assert first["mean_sm_clock_mhz"] < min(d["mean_sm_clock_mhz"] for d in others)
    assert [i.title for i in first["incidents"]] == [incident.title] and first["open_incidents"] == 1
    assert [t["hosts"] for t in first["failing_tests"]] == [["gpu003", "gpu004"]]
    assert all(not d["failing_tests"] or d["node"].hostname == "gpu004" for d in others)
    assert len(first["gpus"]) == 2 and {"gpu", "mean_util", "mean_sm_clock_mhz"} <= set(first["gpus"][0])


def test_a_utilisation_miss_blames_the_nodes_below_target_in_points(chat, record_telemetry):
    slo = Slo.objects.create(name="chat-util", objective="gpu_utilisation", scope="service", service=chat, target=95)
    record_telemetry()
    status = services.slo_status(slo, windows=("1h",))

    assert status["budgets"][0].met is False and status["blame_window"] == "1h"
    dragged = status["draggers"]
    assert dragged and all(d["drag_unit"] == "points" for d in dragged)
    # (target - its mean) / 4 nodes: the points of the scope's mean that node costs.
    for d in dragged:
        assert d["drag"] == pytest.approx(max(0.0, 95 - d["mean_util"]) / 4)
    assert dragged == sorted(dragged, key=lambda d: -d["drag"])


def test_page_and_api_show_the_blame_and_the_30_day_window(chat, browser_as, api_as, viewer, record_telemetry):
    slo = Slo.objects.create(name="chat-tps", objective="throughput", scope="service", service=chat, target=99)
    Incident.objects.create(title="NCCL timeout on gpu003", node=Node.objects.get(hostname="gpu003"))
    _failing_pair("gpu003", "gpu004")
    record_telemetry()

    page = browser_as(viewer).get("/telemetry/slos/").content.decode()
    assert "<th>30d: compliance" in page and 'data-dragger="gpu003"' in page
    assert "incident: NCCL timeout on gpu003" in page and "failing pair gpu003 + gpu004" in page

    body = api_as(viewer).get(f"/api/slos/{slo.public_id}/status/").json()
    assert [b["window"] for b in body["budgets"]] == ["1h", "24h", "7d", "30d"]
    first = body["draggers"][0]
    assert first["node"] == "gpu003" and first["incidents"][0]["title"] == "NCCL timeout on gpu003"
    assert first["failing_tests"][0]["hosts"] == ["gpu003", "gpu004"] and first["drag_unit"] == "tokens/s"
    assert body["blame_window"] in ("1h", "24h", "7d", "30d")

    telemetry = browser_as(viewer).get("/telemetry/?window=30d").content.decode()
    assert "<strong>30d</strong>" in telemetry and "Unknown window" not in telemetry


def test_blame_follows_causes_a_benchmark_pair_bears_on_throughput_not_on_latency_or_energy(chat, record_telemetry):
    """A failing pair is a slow link: it can starve tokens/s, not a node's decode latency or its energy per token;
    and a pair with a node outside the service is another workload's."""
    _failing_pair("gpu003", "gpu004")
    outside = Node.objects.create(hostname="gpu099", rack=Node.objects.first().rack)
    _failing_pair("gpu003", outside.hostname)
    slos = [
        Slo.objects.create(name=f"chat-{objective}", objective=objective, scope="service", service=chat, target=target)
        for objective, target in (("throughput", 99), ("latency_p99", 1), ("energy_per_mtok", 0.01))
    ]
    record_telemetry()

    tests = {}
    for row in slos:
        status = services.slo_status(row, windows=("1h",))
        assert not status["error"] and status["draggers"]
        tests[row.objective] = {tuple(t["hosts"]) for d in status["draggers"] for t in d["failing_tests"]}

    assert tests == {"throughput": {("gpu003", "gpu004")}, "latency_p99": set(), "energy_per_mtok": set()}


def test_the_blame_is_recorded_by_the_minute_run_and_read_by_the_page(chat, record_telemetry, monkeypatch):
    slo = Slo.objects.create(name="chat-tps", objective="throughput", scope="service", service=chat, target=99)
    Incident.objects.create(title="NCCL timeout on gpu003", node=Node.objects.get(hostname="gpu003"))
    now = timezone.now().timestamp()  # the clock's
    record_telemetry(now)
    worked_out = services.slo_status(slo, end=now)["draggers"]  # nothing recorded yet: worked out for the view

    assert services.record_slo_blame(until=now) == len(services.SLO_WINDOWS)
    assert services.record_slo_blame(until=now) == 0  # once a window's step
    assert SloBlame.objects.filter(slo=slo).count() == len(services.SLO_WINDOWS)

    def worked_out_again(*args, **kwargs):
        raise AssertionError("the view worked the blame out")

    monkeypatch.setattr(services, "ranked_draggers", worked_out_again)
    status = services.slo_status(slo, end=now)
    assert status["draggers"] == worked_out and status["draggers"][0]["node"].hostname == "gpu003"
    assert status["draggers"][0]["open_incidents"] == 1  # joined when read: the incidents as they are now
    # The next minute's view reads the step before until the minute run records its own.
    assert services.slo_status(slo, end=now + 60)["draggers"] == worked_out
