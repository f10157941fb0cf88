"""The warm-up at server start: the first views of the dashboard, the cluster telemetry and the SLOs find what they
ask for worked out already."""

import threading
import time

import pytest

from apps.core.audit import audit_context
from apps.core.choices import ChangeSource
from apps.monitoring import telemetry, warmup
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


def test_the_warm_up_runs_again_just_after_each_turn_of_its_interval_until_stopped_and_tunes_the_gc_once(
    monkeypatch,
):
    rounds, tuned, stop = [], [], threading.Event()
    monkeypatch.setattr(warmup, "warm_up", lambda: rounds.append(time.time()) or 0.0)
    thread = warmup.start_warm_up(then=lambda: tuned.append(1), every=0.5, stop=stop)
    deadline = time.monotonic() + 10
    while len(rounds) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    thread.join(5)
    assert not thread.is_alive() and len(rounds) >= 3 and tuned == [1]
    assert all(moment % 0.5 < 0.3 for moment in rounds[1:])  # just after a turn, as the minute's windows move
    assert all(b - a > 0.25 for a, b in zip(rounds[1:], rounds[2:], strict=False))  # one round a turn
