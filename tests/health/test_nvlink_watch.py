"""The NVLink and IMEX faults of a GB200 NVL72 rack through the health loop: the telemetry watch (the simulator's
model, as in the embedded wiring) reads each GPU's links; a switch tray down is ONE `nvlink_switch_tray_down` event on
the switch tray (no compute tray unhealthy, none quarantined: the shipped policy notifies), a tray's links degraded is
`nvlink_degraded` on the tray (the shipped policy would quarantine it, in shadow); the topology's `nvlink-domains` rule
fails while either is open; the watch after the fault is cleared clears the event and the rule passes again. An IMEX
peer lost is `imex_peer_lost` on the tray whose daemon the domain lost, cleared when it reads READY again."""

import datetime as dt

import pytest
from django.conf import settings
from django.urls import reverse

from apps.health import services as health
from apps.health.choices import ClearedBy, ComponentType, Severity, Source
from apps.health.models import HealthEvent
from apps.health.panels import wrong_now
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node, NvlinkSwitchTray
from apps.monitoring import watch
from apps.monitoring.telemetry import PrometheusTelemetry
from apps.remediation import services as remediation
from apps.remediation.choices import Action, Mode, Outcome
from apps.simulator import services as simulator
from apps.simulator.exporters import dcgm_exposition
from apps.simulator.models import SimChange, SimFault
from apps.topology.services import evaluate_topology
from tests.topology.helpers import rule

pytestmark = pytest.mark.django_db

T = 1_790_000_000 // 86_400 * 86_400  # a fixed midnight
PERIOD = settings.RACKPILOT_PERIODIC_TASKS["rackpilot.monitoring.watch_telemetry"]


def _at(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


@pytest.fixture
def rack():
    load_cluster(ClusterShape(compute_nodes=2, nodes_per_rack=2, management_nodes=0, rack_scale_racks=1))
    Node.objects.update(created=_at(T - 86_400))
    return {node.hostname: node for node in Node.objects.filter(nvlink_domain__isnull=False)}


def _inject(node, kind, target="", since=T, **parameters):
    fault = simulator.inject_fault(node=node, kind=kind, target=target, parameters=parameters)
    SimFault.objects.filter(pk=fault.pk).update(created=_at(since))


def domain_rule():
    return rule(evaluate_topology(), "nvlink-domains")


def test_a_switch_tray_down_is_one_event_on_the_switch_tray_the_rule_fails_and_no_tray_is_quarantined(rack):
    _inject(rack["nvl01-t04"], "nvswitch_tray_down", "3")

    [event] = watch.watch_telemetry(now=T + PERIOD)

    switch = NvlinkSwitchTray.objects.get(domain__name="nvl01", slot=3)
    assert (event.kind, event.component_type, event.nvlink_switch_tray, event.node) == (
        "nvlink_switch_tray_down",
        ComponentType.NVLINK_SWITCH_TRAY,
        switch,
        None,
    )
    assert (event.severity, event.source) == (Severity.MAJOR, Source.TELEMETRY)
    assert event.summary.startswith(f"{switch.name} (switch tray 3 of nvl01) down: every GPU of the domain lost its 2")
    assert "72 GPUs on 18 trays report" in event.summary
    assert event.evidence[0]["metric"] == "DCGM_FI_DEV_NVLINK_GET_STATE" and event.evidence[0]["links"] == [4, 5]
    assert not HealthEvent.objects.filter(kind="nvlink_degraded").exists()  # the links are the switch tray's
    assert {health.node_health(node).state for node in rack.values()} == {"healthy"}
    # "What is wrong now" lists it under the switch tray, linking to the rack it is mounted in.
    [group] = [group for group in wrong_now()["groups"] if group.label == switch.name]
    assert group.url == reverse("rack-detail", args=[switch.domain.rack.public_id])

    result = domain_rule()
    assert result.verdict == "fail"
    assert f"nvl01 switch tray 3 ({switch.name}): every GPU's 2 links to it down, measured" in result.detail
    assert "nvl01:switch-tray3" in result.offending and result.figures["links_missing"] == 72 * 2

    # The shipped policy notifies the on-call about the switch tray, once; nothing drains the 18 trays.
    decisions = remediation.evaluate(now=_at(T + PERIOD), queue=False)
    assert [(d.policy.name, d.action, d.mode, d.outcome, d.node) for d in decisions] == [
        ("NVLink switch tray down", Action.NOTIFY, Mode.ON, Outcome.ACTED, None)
    ]
    assert not any(node.is_drained for node in Node.objects.filter(nvlink_domain__isnull=False))

    # The same reading the next run folds into the event (no second one); the fault cleared, the run after clears it.
    watch.watch_telemetry(now=T + 2 * PERIOD)
    assert HealthEvent.objects.get() == event and HealthEvent.objects.get().count == 1
    simulator.clear_faults(node=rack["nvl01-t04"])
    assert watch.watch_telemetry(now=T + 3 * PERIOD) == []
    event.refresh_from_db()
    assert event.cleared_at == _at(T + 3 * PERIOD) and event.cleared_by == ClearedBy.VALIDATION
    assert event.clear_evidence["links_down"] == 0
    assert domain_rule().verdict == "pass"


def test_one_trays_links_degraded_is_nvlink_degraded_on_the_tray_and_would_be_quarantined(rack):
    tray = rack["nvl01-t05"]
    _inject(tray, "tray_nvlink_degraded", links=2)

    [event] = watch.watch_telemetry(now=T + PERIOD)

    assert (event.kind, event.component_type, event.node, event.gpu) == ("nvlink_degraded", "node", tray, None)
    assert event.summary == "every GPU of the tray lost 2 of its 18 NVLink links to switch tray 9 (inactive: 16-17)"
    observed = event.evidence[0]
    assert (observed["links_down"], observed["switch_tray"], observed["down"]) == (2, 9, [16, 17])
    assert health.node_health(tray).state == "unhealthy"
    assert health.node_health(rack["nvl01-t06"]).state == "healthy"

    result = domain_rule()
    assert result.verdict == "fail"
    assert "nvl01-t05 every GPU: 2 links down to switch tray 9, measured (nvlink_degraded" in result.detail
    assert "nvl01-t05" in result.offending

    decisions = remediation.evaluate(now=_at(T + PERIOD), queue=False)
    mine = [d for d in decisions if d.event == event]
    assert [(d.policy.name, d.action, d.mode, d.outcome) for d in mine] == [
        ("NVLink links degraded", Action.QUARANTINE, Mode.SHADOW, Outcome.WOULD_ACT)
    ]
    assert mine[0].reason.startswith("Would drain nvl01-t05 through the scheduler")

    operators = health.record_event(
        component=rack["nvl01-t09"], source=Source.OPERATOR, kind="nvlink_degraded", severity=Severity.MAJOR,
        summary="NCCL all_reduce across the domain below its floor on this tray", at=_at(T + PERIOD),
    )  # fmt: skip
    simulator.clear_faults(node=tray)
    watch.watch_telemetry(now=T + 2 * PERIOD)
    event.refresh_from_db()
    assert event.cleared_at == _at(T + 2 * PERIOD) and event.cleared_by == ClearedBy.VALIDATION
    operators.refresh_from_db()
    assert operators.is_open  # what an operator measured is theirs to clear, whatever the links say


def test_one_gpus_link_down_is_nvlink_degraded_on_that_gpu(rack):
    _inject(rack["nvl01-t02"], "nvlink_down", "1", link=4)

    events = watch.watch_telemetry(now=T + PERIOD)

    degraded = [event for event in events if event.kind == "nvlink_degraded"]
    assert [(event.gpu.node.hostname, event.gpu.index) for event in degraded] == [("nvl01-t02", 1)]
    assert degraded[0].summary == "GPU 1 lost 1 of its 18 NVLink links to switch tray 3 (inactive: 4)"
    assert "nvl01-t02 GPU 1: 1 link down to switch tray 3" in domain_rule().detail


def test_the_exporter_shows_each_links_state_and_prometheus_answers_read_as_the_links_down(rack, monkeypatch):
    _inject(rack["nvl01-t04"], "nvswitch_tray_down", "3")
    page = dcgm_exposition(simulator.telemetry_model(workloads=watch.telemetry().workloads), "nvl01-t07", T + 1)
    states = [line for line in page.splitlines() if line.startswith("DCGM_FI_DEV_NVLINK_GET_STATE{")]
    assert len(states) == 4 * 18
    assert 'gpu="0"' in states[4] and 'nvlink="4"' in states[4] and states[4].endswith(" 0")
    assert states[6].endswith(" 1")
    assert 'DCGM_FI_IMEX_DAEMON_STATUS{Hostname="nvl01-t07"} 5' in page.splitlines()

    answer = [
        {"metric": {"Hostname": "nvl01-t07", "gpu": "0", "nvlink": str(link)}, "value": [T, str(int(link != 5))]}
        for link in range(18)
    ]
    prometheus = PrometheusTelemetry("http://prometheus.example:9090")
    monkeypatch.setattr(prometheus, "query", lambda promql, at: answer)
    assert prometheus.nvlink_values_now(hostnames=["nvl01-t07"], at=T) == {
        ("nvl01-t07", "0"): {"links": 18, "down": [5]}
    }


def test_an_imex_peer_lost_is_imex_peer_lost_on_that_tray_and_cleared_when_its_daemon_is_ready(rack):
    # Injected on one tray, naming another: every tray's `nvidia-imex-ctl -N` shows nvl01-t06 unavailable.
    _inject(rack["nvl01-t01"], "imex_peer_lost", "nvl01-t06")

    events = [event for event in watch.watch_telemetry(now=T + PERIOD) if event.kind == "imex_peer_lost"]

    assert [(event.node.hostname, event.component_type, event.severity) for event in events] == [
        ("nvl01-t06", "node", Severity.MAJOR)
    ]
    [event] = events
    assert event.summary.startswith("IMEX peer lost: nvl01-t06's IMEX daemon is unavailable to the domain nvl01")
    assert event.evidence[0] | {"at": None} == {
        "at": None,
        "source": "telemetry",
        "metric": "DCGM_FI_IMEX_DAEMON_STATUS",
        "value": 7,
    }
    decisions = [d for d in remediation.evaluate(now=_at(T + PERIOD), queue=False) if d.event == event]
    assert [(d.policy.name, d.action, d.mode, d.outcome) for d in decisions] == [
        ("IMEX peer lost", Action.QUARANTINE, Mode.SHADOW, Outcome.WOULD_ACT)
    ]

    simulator.clear_faults(node=rack["nvl01-t01"])
    watch.watch_telemetry(now=T + 2 * PERIOD)
    event.refresh_from_db()
    assert event.cleared_at == _at(T + 2 * PERIOD) and event.clear_evidence["value"] == 5


def test_the_rack_page_shows_its_switch_trays_health_which_no_node_page_does(rack, client, viewer):
    _inject(rack["nvl01-t04"], "nvswitch_tray_down", "3")
    [event] = watch.watch_telemetry(now=T + PERIOD)
    client.force_login(viewer)
    domain_rack = NvlinkSwitchTray.objects.get(domain__name="nvl01", slot=3).domain.rack

    page = client.get(reverse("rack-detail", args=[domain_rack.public_id])).content.decode()

    section = page[page.index('id="health-events"') :]
    assert "NVLink switch trays: health" in section and f'data-event="{event.public_id}"' in section
    assert "nvlink_switch_tray_down" in section and "Major" in section
    node_page = client.get(reverse("node-detail", args=[rack["nvl01-t04"].public_id])).content.decode()
    assert f'data-event="{event.public_id}"' not in node_page  # the switch tray's fault is no tray's
    h200 = Node.objects.filter(nvlink_domain__isnull=True).first().rack
    assert 'id="health-events"' not in client.get(reverse("rack-detail", args=[h200.public_id])).content.decode()


def test_a_tray_powered_off_is_left_out_of_the_watch_and_makes_no_event(rack):
    """A tray its BMC turned off (the leak policy's power-off) reports no GPU, link or IMEX status: the watch judges the
    domain from the trays that report and records nothing about the one that is off (its links counted as before, and
    a fault it had when it went off, until then; a flood of events for trays off on purpose, never)."""
    off = rack["nvl01-t05"]
    _inject(off, "tray_nvlink_degraded", since=T - 600)
    simulator.bmc_power(node=off, action="off")
    SimChange.objects.filter(node=off, key="power:state").update(updated=_at(T - 300))
    _inject(rack["nvl01-t04"], "nvswitch_tray_down", "3")

    [event] = watch.watch_telemetry(now=T + PERIOD)

    assert event.kind == "nvlink_switch_tray_down"
    assert "68 GPUs on 17 trays report" in event.summary
    assert not HealthEvent.objects.filter(node=off).exists()
