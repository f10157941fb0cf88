"""The warm-up at server start: the first views of the dashboard, the cluster telemetry and the SLOs find what they
ask for worked out already."""

import pytest

from apps.core.audit import audit_context
from apps.core.choices import ChangeSource
from apps.monitoring import telemetry
from apps.monitoring.demo import load_slos
from apps.monitoring.warmup import warm_up
from apps.simulator import services as simulator
from apps.workloads.demo import load_workloads

pytestmark = pytest.mark.django_db
FIRST_PAGES = ("/", "/telemetry/", "/telemetry/slos/")


@pytest.fixture
def demo(demo_cluster, monkeypatch, settings):
    settings.RACKPILOT_PROMETHEUS_URL = ""  # the simulator's telemetry, whose histories the warm-up builds
    with audit_context(source=ChangeSource.COMMAND):
        load_workloads()
        load_slos()
    monkeypatch.setattr(simulator, "_HISTORIES", {})  # nothing kept from another test's cluster
    telemetry.ANSWERS.clear()
    telemetry.NODE_PARTS.clear()


def test_after_the_warm_up_the_first_pages_build_no_histories_and_evaluate_no_rules(
    demo, browser_as, operator, monkeypatch
):
    assert warm_up() > 0
    built = []
    monkeypatch.setattr(simulator, "_rebuilt", lambda *args: built.append(args))
    monkeypatch.setattr("apps.topology.services.evaluate_topology", lambda **kw: built.append(kw))
    client = browser_as(operator)
    for path in FIRST_PAGES:
        assert client.get(path).status_code == 200
    assert built == []
