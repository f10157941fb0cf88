"""Where the GPU-hours go: busy (SM-active weighted), allocated but idle, unallocated — per workload, node and rack,
from the simulator here (tests/monitoring/test_prometheus.py checks Prometheus gives the same), on the page, the
dashboard and GET /api/gpu-hours/."""

import datetime as dt

import pytest
from django.test import Client
from django.utils import timezone

from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node
from apps.monitoring import gpuhours
from apps.monitoring.telemetry import Window
from apps.simulator import services as simulator
from apps.simulator.models import SimFault
from apps.simulator.telemetry import SM_ACTIVE_PER_BUSY, TRAINING_BUSY
from apps.workloads.models import InferenceService, TrainingJob
from apps.workloads.services import set_training_nodes

pytestmark = pytest.mark.django_db

HOUR = 3600.0


@pytest.fixture
def cluster(db):
    """Six nodes in two racks: a service on gpu001-002, a training job on gpu003-004, gpu005-006 idle; all booted
    and running for the last two hours."""
    load_cluster(ClusterShape(compute_nodes=6, nodes_per_rack=3, management_nodes=0))
    nodes = {node.hostname: node for node in Node.objects.all()}
    service = InferenceService.objects.create(name="chat", model="m", design_tokens_per_second=5000)
    service.nodes.set([nodes["gpu001"], nodes["gpu002"]])
    job = TrainingJob.objects.create(name="pretrain", state="running")
    set_training_nodes(job=job, nodes=[nodes["gpu003"], nodes["gpu004"]])
    two_hours_ago = timezone.now() - dt.timedelta(hours=2)
    InferenceService.objects.update(created=two_hours_ago)
    TrainingJob.objects.update(created=two_hours_ago, started_at=two_hours_ago)
    Node.objects.update(created=two_hours_ago - dt.timedelta(hours=1))
    return nodes


def test_every_gpu_hour_is_busy_idle_or_unallocated(cluster):
    result = gpuhours.gpu_hours(window=Window.named("1h"))
    nodes = {row["node"].hostname: row["split"] for row in result.nodes}

    assert result.cluster.gpus == 48 and result.cluster.total == pytest.approx(48.0)
    for split in nodes.values():
        assert split.busy + split.allocated_idle + split.unallocated == pytest.approx(8.0)
    # Idle nodes: nothing busy, nothing held.
    assert nodes["gpu005"].unallocated == pytest.approx(8.0) and nodes["gpu005"].busy == 0
    # Training keeps its GPUs ~93 % busy, 82 % of SMs active when busy: ~76 % of the hours busy, the rest held idle.
    expected = 8 * TRAINING_BUSY * SM_ACTIVE_PER_BUSY["training"]
    assert nodes["gpu003"].busy == pytest.approx(expected, rel=0.05)
    assert nodes["gpu003"].allocated_idle == pytest.approx(8 - nodes["gpu003"].busy)
    assert nodes["gpu003"].unallocated == pytest.approx(0, abs=1e-9)
    # Serving at about half its design load, decoding on 45 % of the SMs: mostly held but idle.
    assert nodes["gpu001"].allocated_idle > 5 and nodes["gpu001"].busy < 3
    workloads = {(row["kind"], row["name"]): row["split"] for row in result.workloads}
    assert set(workloads) == {("service", "chat"), ("training", "pretrain")}
    assert workloads[("training", "pretrain")].gpus == 16
    racks = {row["rack"].name: row["split"] for row in result.racks}
    assert len(racks) == 2 and sum(r.total for r in racks.values()) == pytest.approx(48.0)
    assert result.cluster.idle_share == pytest.approx(result.cluster.allocated_idle / 48.0)


def test_a_workload_started_within_the_window_holds_only_from_its_start(cluster):
    half_hour_ago = timezone.now() - dt.timedelta(minutes=30)
    TrainingJob.objects.update(started_at=half_hour_ago)
    result = gpuhours.gpu_hours(window=Window.named("1h"))
    node = next(row["split"] for row in result.nodes if row["node"].hostname == "gpu003")

    window = Window.named("1h")
    held = (window.end - half_hour_ago.timestamp()) / HOUR
    assert node.busy + node.allocated_idle == pytest.approx(8 * held, rel=0.02)
    assert node.unallocated == pytest.approx(8 * (1 - held), rel=0.05)


def test_a_straggler_leaves_its_partners_gpus_held_and_idle(cluster):
    before = gpuhours.gpu_hours(window=Window.named("1h"))
    simulator.inject_fault(node=cluster["gpu004"], kind="straggler", target="", parameters={})
    SimFault.objects.update(created=timezone.now() - dt.timedelta(hours=2))
    after = gpuhours.gpu_hours(window=Window.named("1h"))

    def node(result, host):
        return next(row["split"] for row in result.nodes if row["node"].hostname == host)

    assert node(after, "gpu003").allocated_idle > node(before, "gpu003").allocated_idle + 1
    assert node(after, "gpu003").allocated_idle > node(after, "gpu004").allocated_idle + 1  # the straggler stays busy
    assert "gpu003" in [row["node"].hostname for row in gpuhours.idle_holders(after)]


def test_split_of_one_gpu_never_counts_more_than_the_window():
    split = gpuhours.split_gpu(hours=1.0, busy_hours=1.5, allocated_hours=1.0)
    assert (split.busy, split.allocated_idle, split.unallocated) == (1.0, 0.0, 0.0)
    split = gpuhours.split_gpu(hours=1.0, busy_hours=0.0, allocated_hours=0.25)
    assert (split.busy, split.allocated_idle, split.unallocated) == (0.0, 0.25, 0.75)


def test_page_dashboard_and_api(cluster, browser_as, api_as, viewer):
    assert Client().get("/telemetry/gpu-hours/").status_code == 302
    html = browser_as(viewer).get("/telemetry/gpu-hours/?window=24h").content.decode()
    assert 'data-workload="pretrain"' in html and 'data-node="gpu005"' in html and "gpu-hours-nodes" in html
    assert "Unknown window" in browser_as(viewer).get("/telemetry/gpu-hours/?window=2y").content.decode()

    dashboard = browser_as(viewer).get("/").content.decode()
    assert 'id="gpu-hours-idle-share"' in dashboard and "gpu001" in dashboard

    api = api_as(viewer)
    answer = api.get("/api/gpu-hours/", {"window": "30d"})
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["window"] == "30d" and body["end"] - body["start"] == 30 * 86400
    assert body["cluster"]["gpus"] == 48
    parts = body["cluster"]["busy"] + body["cluster"]["allocated_idle"] + body["cluster"]["unallocated"]
    assert parts == pytest.approx(body["cluster"]["gpu_hours"]) and body["cluster"]["gpu_hours"] == pytest.approx(
        48 * 720
    )
    assert {row["node"] for row in body["nodes"]} == {f"gpu00{n}" for n in range(1, 7)}
    assert next(row for row in body["nodes"] if row["node"] == "gpu003")["workload"] == "pretrain"

    assert api.get("/api/gpu-hours/", {"window": "2y"}).status_code == 400
    bad = api.get("/api/gpu-hours/", {"windw": "1h"})
    assert bad.status_code == 400 and "windw" in bad.json()
    assert api.get("/api/gpu-hours/?window=1h&window=24h").status_code == 400
    assert Client().get("/api/gpu-hours/").status_code in (401, 403)


def test_prometheus_down_is_a_message_not_a_500(cluster, settings, browser_as, api_as, viewer):
    settings.RACKPILOT_PROMETHEUS_URL = "http://127.0.0.1:9"
    settings.RACKPILOT_PROMETHEUS_TIMEOUT_SECONDS = 1
    page = browser_as(viewer).get("/telemetry/gpu-hours/")
    assert page.status_code == 200 and "could not reach Prometheus at http://127.0.0.1:9" in page.content.decode()
    answer = api_as(viewer).get("/api/gpu-hours/")
    assert answer.status_code == 503 and "could not reach Prometheus" in answer.json()["detail"]


def test_the_backfill_samples_are_the_models_readings(cluster):
    """ClusterTelemetry.samples (bench/monitoring.py's series) gives what gpu_reading and the energy counter give,
    before and after a fault begins, and its SM-active integral is the GPU-hours' busy figure."""
    simulator.inject_fault(node=cluster["gpu003"], kind="power_cap", target="", parameters={"watts": 300})
    SimFault.objects.update(created=timezone.now() - dt.timedelta(minutes=20))
    from apps.monitoring.telemetry import current_workloads

    model = simulator.telemetry_model(workloads=current_workloads())
    end = float(int(timezone.now().timestamp()) // 15 * 15)
    times = [end - 3600 + 15 * k for k in range(241)]
    for hostname in ("gpu001", "gpu003", "gpu005"):
        rows = list(model.samples(hostname, times))
        for t, busy, sm_active, energy in rows[::20]:
            reading = model.gpu_reading(hostname, 0, t)
            assert int(round(100 * busy)) == reading["util"] and sm_active == reading["sm_active"]
            assert set(energy) == set(range(8))
            assert energy[0] == pytest.approx(model.energy_counter_mj(hostname, 0, t), rel=1e-9, abs=2)
        stepped = sum(sm for _, _, sm, _ in rows[1:]) * 15
        assert model.sm_active_seconds(hostname, times[0], times[-1]) == pytest.approx(stepped, rel=0.01, abs=1)
