"""A failure's SLO budget burned: the SLOs whose nodes include the failed node, their missed steps from the event's
first sighting to its clearing as a share of their 30-day budget, counted from the embedded wiring's record."""

import datetime as dt

import pytest
from django.utils import timezone

from apps.health import costs
from apps.health import services as health
from apps.health.choices import Severity, Source
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Gpu, Node
from apps.monitoring import services
from apps.monitoring.models import Slo
from apps.monitoring.telemetry import SimulatorTelemetry
from apps.workloads.models import InferenceService

pytestmark = pytest.mark.django_db


@pytest.fixture
def chat(db):
    load_cluster(ClusterShape(compute_nodes=4, nodes_per_rack=2, management_nodes=0))
    service = InferenceService.objects.create(
        name="chat", model="m", design_tokens_per_second=4000, latency_target_ms=100
    )
    service.nodes.set(Node.objects.filter(hostname__in=["gpu001", "gpu002"]))
    two_hours_ago = timezone.now() - dt.timedelta(hours=2)
    InferenceService.objects.update(created=two_hours_ago)
    Node.objects.update(created=two_hours_ago - dt.timedelta(hours=1))
    return InferenceService.objects.get()


def test_the_slos_covering_the_node_burn_their_missed_steps_share_of_the_30_day_budget(chat, record_telemetry):
    now = timezone.now().timestamp() // 60 * 60
    util = Slo.objects.create(
        name="chat-util", objective="gpu_utilisation", scope="service", service=chat, target=99.9, compliance=0.99
    )
    other = Node.objects.get(hostname="gpu004").rack
    Slo.objects.create(name="far-rack", objective="gpu_utilisation", scope="rack", rack=other, target=85)
    record_telemetry(now)
    at = dt.datetime.fromtimestamp(now, dt.UTC)
    event = health.record_event(
        component=Gpu.objects.get(node__hostname="gpu001", index=0),
        source=Source.TELEMETRY,
        kind="xid79",
        severity=Severity.CRITICAL,
        summary="GPU 0: XID 79",
        at=at - dt.timedelta(minutes=30),
    )
    cost = costs.failure_cost(event, now=at)
    assert [burn["slo"] for burn in cost.slo] == ["chat-util"]  # far-rack does not include gpu001
    judged, good = services.slo_counts_between(
        SimulatorTelemetry(), util.spec(), start=event.first_seen.timestamp(), end=now
    )
    assert judged > 0
    expected = 100 * (judged - good) / (0.01 * 30 * 24 * 60)
    assert cost.slo[0]["budget_percent"] == pytest.approx(expected)
