"""The telemetry watch in the services wiring: a real Prometheus scraping dcgm-exporter's series (the simulated
exporters), an XID 79 on one GPU → one critical event on that GPU. The read waits for Prometheus to have scraped the
fault, not for a fixed time."""

import json
import time
import urllib.request

import pytest
from django.db.models import Q

from apps.health.models import HealthEvent
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Cable, Node
from apps.monitoring import watch
from apps.monitoring.exporters import exporter_server
from apps.monitoring.rule_files import write_rules
from apps.monitoring.services import telemetry_health
from apps.monitoring.targets import write_targets
from apps.monitoring.telemetry import RECORDED_NONZERO, PrometheusTelemetry
from apps.simulator import services as simulator
from tests.monitoring.conftest import start_prometheus  # noqa: F401  (the fixture)

pytestmark = pytest.mark.integration


def _scraped(url: str, promql: str, *, count: int, timeout: float) -> float:
    """The time at which Prometheus first answers `promql` with at least `count` series."""
    deadline = time.monotonic() + timeout
    query = urllib.request.quote(promql)
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{url}/api/v1/query?query={query}", timeout=5) as answer:
            found = json.load(answer)["data"]["result"]
        if len(found) >= count:
            return max(float(one["value"][0]) for one in found)
        time.sleep(0.5)
    raise AssertionError(f"Prometheus at {url} had fewer than {count} series of {promql} after {timeout} s")


@pytest.mark.parametrize("rules", [False, True], ids=["raw series", "recorded nonzero readings"])
def test_an_xid_prometheus_scraped_is_an_event_on_its_gpu(
    transactional_db,
    tmp_path,
    start_prometheus,  # noqa: F811
    settings,
    rules,
    monkeypatch,
):
    """Without Rackpilot's rules the dashboard's read asks every GPU's latest XID; with them, the GPUs the rule
    recorded as not 0 (the same answer)."""
    load_cluster(ClusterShape(compute_nodes=2, nodes_per_rack=2, management_nodes=0))
    simulator.inject_fault(node=Node.objects.get(hostname="gpu002"), kind="xid79", target="4", parameters={})
    server = exporter_server(host="127.0.0.1", port=0, refresh=1.0)
    server.start()
    asked = []
    query = PrometheusTelemetry.query
    monkeypatch.setattr(
        PrometheusTelemetry, "query", lambda self, promql, at: asked.append(promql) or query(self, promql, at=at)
    )
    try:
        targets = tmp_path / "targets"
        write_targets(directory=str(targets), exporters=f"127.0.0.1:{server.port}")
        url = start_prometheus(targets, rules=write_rules(directory=str(targets)) if rules else None)
        at = _scraped(url, "DCGM_FI_DEV_XID_ERRORS > 0", count=1, timeout=120)
        if rules:
            at = max(at, _scraped(url, f"{RECORDED_NONZERO['xid']} > 0", count=1, timeout=120))
        settings.RACKPILOT_PROMETHEUS_URL = url

        hosts = ["gpu001", "gpu002"]
        every = PrometheusTelemetry(url).gpu_values_at("xid", hostnames=hosts, at=at)
        reporting = PrometheusTelemetry(url).gpu_values_at("xid", hostnames=hosts, at=at, nonzero=True)
        elsewhere = PrometheusTelemetry(url).gpu_values_at("xid", hostnames=["gpu001"], at=at, nonzero=True)
        health = telemetry_health(now=at)  # the dashboard's count, before the event makes the GPU unhealthy
        events = watch.watch_telemetry(now=at)
    finally:
        server.stop()

    assert ("DCGM_FI_DEV_XID_ERRORS != 0" in asked) is not rules
    assert reporting == {("gpu002", "4"): 79.0} == {key: value for key, value in every.items() if value}
    assert elsewhere == {}  # gpu002's XID is not gpu001's
    assert len(every) >= 8  # with the zeros, which Prometheus leaves out when asked for nonzero readings only
    assert [(row["node"].hostname, row["gpu"], row["xid"]) for row in health["flagged"]] == [("gpu002", "4", 79)]
    [event] = events
    assert (event.gpu.node.hostname, event.gpu.index, event.kind, event.severity) == ("gpu002", 4, "xid79", "critical")
    assert HealthEvent.objects.get() == event


def test_row_remaps_slowdowns_pcie_and_nvlink_prometheus_scraped_are_events(
    transactional_db,
    tmp_path,
    start_prometheus,  # noqa: F811
    settings,
):
    load_cluster(ClusterShape(compute_nodes=2, nodes_per_rack=2, management_nodes=0))
    first, second = Node.objects.get(hostname="gpu001"), Node.objects.get(hostname="gpu002")
    simulator.inject_fault(node=first, kind="ecc", target="1", parameters={"count": 12})
    simulator.inject_fault(node=first, kind="thermal", target="2", parameters={})
    simulator.inject_fault(node=second, kind="pcie_downtrained", target="3", parameters={"gen": 3, "width": 4})
    simulator.inject_fault(node=second, kind="nvlink_down", target="5", parameters={})
    server = exporter_server(host="127.0.0.1", port=0, refresh=1.0)
    server.start()
    try:
        targets = tmp_path / "targets"
        write_targets(directory=str(targets), exporters=f"127.0.0.1:{server.port}")
        url = start_prometheus(targets)
        at = max(
            _scraped(url, "DCGM_FI_DEV_XID_ERRORS > 0", count=2, timeout=120),  # both nodes scraped
            _scraped(url, "DCGM_FI_DEV_ROW_REMAP_FAILURE > 0", count=1, timeout=60),
            _scraped(url, "DCGM_FI_DEV_PCIE_LINK_WIDTH < DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", count=1, timeout=60),
        )
        settings.RACKPILOT_PROMETHEUS_URL = url

        events = watch.watch_telemetry(now=at)
    finally:
        server.stop()

    found = {(event.gpu.node.hostname, event.gpu.index, event.kind): event for event in events}
    assert set(found) == {
        ("gpu001", 1, "xid48"),
        ("gpu001", 1, "ecc_uncorrectable"),
        ("gpu001", 1, "row_remap_pending"),
        ("gpu001", 1, "row_remap_failure"),
        ("gpu001", 2, "gpu_thermal_slowdown"),
        ("gpu002", 3, "pcie_downtrained"),
        ("gpu002", 5, "xid74"),
        ("gpu002", 5, "nvlink_degraded"),  # its link's DCGM_FI_DEV_NVLINK_GET_STATE series is 0
    }
    pcie = found[("gpu002", 3, "pcie_downtrained")]
    assert pcie.summary == "GPU 3: PCIe link downtrained to Gen3 x4 (capable of Gen5 x16)"
    assert found[("gpu001", 1, "ecc_uncorrectable")].evidence[0]["ecc_dbe"] == 12
    assert found[("gpu001", 2, "gpu_thermal_slowdown")].evidence[0]["metric"] == "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"


def test_a_degraded_link_prometheus_scraped_from_node_exporter_is_link_degraded_on_its_cable(
    transactional_db,
    tmp_path,
    start_prometheus,  # noqa: F811
    settings,
):
    load_cluster(ClusterShape(compute_nodes=2, nodes_per_rack=2, management_nodes=0))
    node = Node.objects.get(hostname="gpu002")
    simulator.inject_fault(
        node=node, kind="degraded_cable", target="ens3np0", parameters={"rate_gbps": 200, "crc_per_million": 0}
    )
    server = exporter_server(host="127.0.0.1", port=0, refresh=1.0)
    server.start()
    try:
        targets = tmp_path / "targets"
        write_targets(directory=str(targets), exporters=f"127.0.0.1:{server.port}")
        url = start_prometheus(targets)
        at = max(
            _scraped(url, "node_network_speed_bytes", count=2 * node.nics.count(), timeout=120),  # both nodes
            _scraped(url, "DCGM_FI_DEV_GPU_UTIL", count=16, timeout=60),
        )
        settings.RACKPILOT_PROMETHEUS_URL = url

        events = watch.watch_telemetry(now=at)
    finally:
        server.stop()

    [event] = events  # the other NICs report their planned rate, and no GPU is at fault
    nic = node.nics.get(name="ens3np0")
    cable = Cable.objects.get(Q(a_nic=nic) | Q(b_nic=nic))
    assert (event.kind, event.cable, event.severity, event.source) == ("link_degraded", cable, "major", "telemetry")
    assert (event.evidence[0]["measured_gbps"], event.evidence[0]["planned_gbps"]) == (200, 400)
    cable.refresh_from_db()
    assert cable.measured_gbps == 200
