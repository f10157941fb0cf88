"""The telemetry pages: cluster and node views over a window, from the simulator (embedded wiring) or Prometheus."""

import datetime as dt
import socket

import pytest
from django.utils import timezone

from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node
from apps.simulator import services as simulator
from apps.workloads.models import InferenceService, TrainingJob
from apps.workloads.services import set_training_nodes

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster(clock, db):
    load_cluster(ClusterShape(compute_nodes=3, nodes_per_rack=3, management_nodes=0))
    nodes = {node.hostname: node for node in Node.objects.all()}
    service = InferenceService.objects.create(
        name="chat", model="m", design_tokens_per_second=4000, latency_target_ms=100
    )
    service.nodes.set([nodes["gpu001"]])
    job = TrainingJob.objects.create(name="pretrain", state="running")
    set_training_nodes(job=job, nodes=[nodes["gpu002"], nodes["gpu003"]])
    # Running for two hours, on nodes booted three hours ago: the 1 h window is full.
    hours_ago = timezone.now() - dt.timedelta(hours=2)
    InferenceService.objects.update(created=hours_ago)
    TrainingJob.objects.update(started_at=hours_ago)
    Node.objects.update(created=hours_ago - dt.timedelta(hours=1))
    return nodes


def test_pages_need_a_login(client, cluster):
    assert client.get("/telemetry/").status_code == 302


def test_the_cluster_page_shows_figures_services_and_energy_per_million_tokens(
    browser_as, viewer, cluster, record_telemetry
):
    record_telemetry()
    page = browser_as(viewer).get("/telemetry/", {"window": "1h"}).content.decode()
    assert 'data-plotly-figure="utilisation"' in page and 'data-plotly-figure="power"' in page
    assert "chat" in page and "kWh" in page and "source: simulator" in page
    assert "no tokens in the window" not in page
    assert "Worst p99 (a minute's)" in page and "not all recorded" not in page  # the minutes are recorded
    assert "Each point of the charts is over\n    1 min." in page  # a 30 d window's are 12 h


def test_the_charts_name_the_stretch_each_point_is_taken_over():
    from apps.monitoring.services import step_text
    from apps.monitoring.telemetry import Window

    assert [step_text(Window.named(name, end=0)) for name in ("1h", "24h", "7d", "30d")] == [
        "1 min",
        "24 min",
        "2.8 h",
        "12 h",
    ]


def test_the_node_page_shows_clock_reasons_and_its_services(browser_as, viewer, cluster):
    fault = simulator.inject_fault(node=cluster["gpu001"], kind="power_cap", target="0", parameters={"watts": 400})
    assert fault.pk
    page = browser_as(viewer).get(f"/telemetry/nodes/{cluster['gpu001'].public_id}/", {"window": "1h"}).content.decode()
    for key in ("utilisation", "power", "temperature", "clocks", "xid"):
        assert f'data-plotly-figure="{key}"' in page
    assert "sw_power_cap" in page and "chat" in page


def test_an_unknown_window_is_said_and_the_default_shown(browser_as, viewer, cluster):
    page = browser_as(viewer).get("/telemetry/", {"window": "1y"}).content.decode()
    assert "Unknown window" in page and "<strong>1h</strong>" in page


def test_a_prometheus_that_is_down_is_a_message_not_a_500(browser_as, viewer, cluster, settings):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings.RACKPILOT_PROMETHEUS_URL = f"http://127.0.0.1:{port}"
    settings.RACKPILOT_PROMETHEUS_TIMEOUT_SECONDS = 1
    response = browser_as(viewer).get("/telemetry/")
    assert response.status_code == 200
    assert f"could not reach Prometheus at http://127.0.0.1:{port}" in response.content.decode()


def test_a_metadata_address_is_refused_on_the_page(browser_as, viewer, cluster, settings):
    settings.RACKPILOT_PROMETHEUS_URL = "http://169.254.169.254/"
    page = browser_as(viewer).get(f"/telemetry/nodes/{cluster['gpu002'].public_id}/").content.decode()
    assert "RACKPILOT_PROMETHEUS_ALLOW_LINK_LOCAL" in page


def test_the_node_page_links_to_telemetry(browser_as, viewer, cluster):
    page = browser_as(viewer).get(f"/nodes/{cluster['gpu002'].public_id}/").content.decode()
    assert f"/telemetry/nodes/{cluster['gpu002'].public_id}/" in page


def test_reading_the_pages_writes_nothing(browser_as, viewer, cluster, django_assert_max_num_queries):
    client = browser_as(viewer)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        client.get("/telemetry/")
    writes = [
        q["sql"] for q in queries.captured_queries if q["sql"].split()[0].upper() in ("INSERT", "UPDATE", "DELETE")
    ]
    assert [sql for sql in writes if "django_session" not in sql] == []


def test_the_dashboard_counts_gpus_reporting_xid_or_ecc_as_not_healthy(
    browser_as, viewer, cluster, record_telemetry, clock
):
    record_telemetry()
    before = browser_as(viewer).get("/").content.decode()
    assert "<strong>24</strong> of the 24 GPUs" in before
    simulator.inject_fault(node=cluster["gpu003"], kind="ecc", target="1", parameters={"count": 2})
    simulator.inject_fault(node=cluster["gpu002"], kind="xid79", target="4", parameters={})
    assert "<strong>24</strong> of the 24 GPUs" in browser_as(viewer).get("/").content.decode()  # not recorded yet
    clock.advance(minutes=2)  # the next minutes, recorded with the faults
    record_telemetry()
    after = browser_as(viewer).get("/").content.decode()
    assert "<strong>22</strong> of the 24 GPUs" in after
    assert "GPU4 —\n      XID 79" in after and "2 uncorrectable ECC errors" in after
