"""The telemetry watch reads each compute node's NICs too (node_exporter's series; here the simulator's model, as in
the embedded wiring): a link up below its planned rate is `link_degraded` on its cable, recorded where the sweep
records it (the cable's measured rate set for the topology), and receive errors growing past the link-error tiers are
`link_errors` there, within the watch's period of the fault."""

import datetime as dt

import pytest
from django.conf import settings

from apps.health.choices import Severity, Source
from apps.health.models import HealthEvent
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Cable, Nic, Node
from apps.monitoring import watch
from apps.monitoring.telemetry import SimulatorTelemetry
from apps.simulator import services as simulator
from apps.simulator.models import SimFault

pytestmark = pytest.mark.django_db

T = 1_790_000_000 // 86_400 * 86_400  # a fixed midnight
PERIOD = settings.RACKPILOT_PERIODIC_TASKS["rackpilot.monitoring.watch_telemetry"]


def _at(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


@pytest.fixture
def fleet(db):
    load_cluster(ClusterShape(compute_nodes=2, nodes_per_rack=2, management_nodes=0))
    Node.objects.update(created=_at(T - 86_400))
    return {node.hostname: node for node in Node.objects.all()}


def _inject(node, target, since, **parameters):
    fault = simulator.inject_fault(node=node, kind="degraded_cable", target=target, parameters=parameters)
    SimFault.objects.filter(pk=fault.pk).update(created=_at(since))


def test_a_degraded_cable_is_link_degraded_on_its_cable_from_the_next_run(fleet):
    t = T + 17
    _inject(fleet["gpu002"], "ens3np0", t, rate_gbps=200, crc_per_million=0)
    assert watch.watch_telemetry(now=t - 1) == []  # healthy NICs at their planned rate make no event

    [event] = watch.watch_telemetry(now=t + PERIOD)

    nic = Nic.objects.get(node__hostname="gpu002", name="ens3np0")
    cable = Cable.objects.get(a_nic=nic) if Cable.objects.filter(a_nic=nic).exists() else Cable.objects.get(b_nic=nic)
    assert (event.kind, event.cable, event.node, event.source) == ("link_degraded", cable, nic.node, Source.TELEMETRY)
    assert event.severity == Severity.MAJOR and event.first_seen == _at(t + PERIOD)
    observed = event.evidence[0]
    assert (observed["measured_gbps"], observed["planned_gbps"]) == (200, 400)
    assert observed["metric"] == "node_network_speed_bytes" and observed["switch_port"]
    assert event.summary.startswith("gpu002:ens3np0 → ") and "link at 200 Gb/s (planned 400 Gb/s)" in event.summary
    cable.refresh_from_db()
    assert cable.measured_gbps == 200  # the topology counts the link as measured

    # The next run reads the same rate: the same event, not a second one.
    watch.watch_telemetry(now=t + 2 * PERIOD)
    assert HealthEvent.objects.get() == event


def test_crc_errors_growing_past_the_tiers_are_link_errors(fleet):
    t = T + 17
    _inject(fleet["gpu001"], "ens5np0", t, rate_gbps=0, crc_per_million=50)

    [event] = watch.watch_telemetry(now=t + PERIOD)

    assert (event.kind, event.node.hostname, event.severity) == ("link_errors", "gpu001", Severity.MAJOR)
    assert event.cable is not None and event.cable.measured_gbps is None  # the rate is as planned
    observed = event.evidence[0]
    assert observed["metric"] == "node_network_receive_errs_total" and observed["errors"] > 0
    # 50 per million since the fault, over the 5 minutes' frames: the fault's share of them
    assert observed["per_million"] == pytest.approx(50 * PERIOD / 300, rel=0.05)


def test_the_simulator_answers_the_nics_rate_and_counters_at_the_moment(fleet):
    _inject(fleet["gpu001"], "ens2np0", T, rate_gbps=100, crc_per_million=1000)
    source = SimulatorTelemetry()

    before = source.nic_values_now(hostnames=["gpu001"], at=T - 1)
    after = source.nic_values_now(hostnames=["gpu001"], at=T + 300)

    assert before[("gpu001", "ens2np0")]["speed_gbps"] == 400 and before[("gpu001", "ens2np0")]["errors"] == 0
    degraded = after[("gpu001", "ens2np0")]
    assert degraded["speed_gbps"] == 100
    assert degraded["errors"] == pytest.approx(degraded["frames"] * 1000 / 1e6, rel=0.01)
    assert after[("gpu001", "ens1np0")] == {**after[("gpu001", "ens1np0")], "speed_gbps": 400, "errors": 0}
