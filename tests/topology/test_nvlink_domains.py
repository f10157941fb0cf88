"""The NVLink domain rule: whole on the demo's GB200 NVL72 rack; a missing switch tray, GPU or tray, a link measured
down, or a partition that is not whole fails it, naming the part; a fleet without NVLink domains has no such rule."""

import pytest

from apps.health import services as health
from apps.health.choices import Severity, Source
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Gpu, Node, NvlinkDomain, NvlinkPartition, NvlinkSwitchTray
from apps.topology.services import evaluate_topology, topology_fingerprint
from tests.topology.helpers import rule

pytestmark = pytest.mark.django_db


@pytest.fixture
def nvl72():
    load_cluster(ClusterShape(compute_nodes=8, rack_scale_racks=1))
    return NvlinkDomain.objects.get(name="nvl01")


def domain_rule():
    return rule(evaluate_topology(), "nvlink-domains")


def test_the_demo_nvl72_domain_is_complete_and_its_partition_whole(nvl72):
    result = domain_rule()
    assert result.verdict == "pass", result.detail
    assert "nvl01 (GB200 NVL72): 18 compute trays, 9 switch trays, every GPU with its 18 links" in result.detail
    assert result.figures["gpus_checked"] == 72 and result.figures["links_missing"] == 0


def test_a_missing_switch_tray_fails_naming_its_slot_and_the_links_lost(nvl72):
    NvlinkSwitchTray.objects.filter(domain=nvl72, slot=3).delete()
    result = domain_rule()
    assert result.verdict == "fail"
    assert "nvl01 switch tray slot 3 (every GPU's 2 links to it)" in result.detail
    assert "nvl01:switch-tray3" in result.offending
    assert result.figures["links_missing"] == 72 * 2


def test_a_missing_gpu_or_tray_fails_naming_it_and_the_partition_spans_the_tray_partly(nvl72):
    Gpu.objects.filter(node__hostname="nvl01-t05", index=2).delete()
    Node.objects.filter(hostname="nvl01-t18").delete()
    result = domain_rule()
    assert result.verdict == "fail"
    assert "nvl01-t05 GPU 2 (not inventoried)" in result.detail
    assert "nvl01 compute tray slot 18 (its 4 GPUs)" in result.figures["missing"]
    assert "nvl01-default spans nvl01-t05 only partly (GPUs missing)" in result.figures["partitions"]
    assert {"nvl01-t05", "nvl01:tray18", "nvl01-default"} <= set(result.offending)


def test_links_measured_down_count_at_their_measured_state(nvl72):
    before = topology_fingerprint()
    gpu = Gpu.objects.get(node__hostname="nvl01-t07", index=1)
    health.record_event(
        component=gpu,
        source=Source.RUNBOOK,
        kind="nvlink_degraded",
        severity=Severity.MAJOR,
        summary="2 of 18 NVLink links inactive",
        evidence={"links_down": 2, "switch_tray": 4},
    )
    assert topology_fingerprint() != before  # the minute's run records the new outcome
    result = domain_rule()
    assert result.verdict == "fail"
    assert "nvl01-t07 GPU 1: 2 links down to switch tray 4, measured (nvlink_degraded" in result.detail
    assert result.figures["links_missing"] == 2 and result.offending == ["nvl01-t07"]


def test_a_link_event_on_a_node_outside_a_domain_is_not_counted(nvl72):
    health.record_event(
        component=Node.objects.get(hostname="gpu001"),
        source=Source.RUNBOOK,
        kind="link_degraded",
        severity=Severity.MAJOR,
        summary="ens1np0 at 200 Gb/s",
    )
    assert domain_rule().verdict == "pass"


def test_a_partition_reaching_outside_its_domain_or_sharing_a_tray_fails_naming_both(nvl72):
    default = NvlinkPartition.objects.get(name="nvl01-default")
    default.nodes.add(Node.objects.get(hostname="gpu001"))
    other = NvlinkPartition.objects.create(name="nvl01-p1", domain=nvl72, partition_id=1)
    other.nodes.add(Node.objects.get(hostname="nvl01-t02"))
    result = domain_rule()
    assert result.verdict == "fail"
    assert "nvl01-default reaches gpu001, outside domain nvl01" in result.figures["partitions"]
    assert "nvl01-p1 shares nvl01-t02 with nvl01-default" in result.figures["partitions"]
    assert {"nvl01-default", "nvl01-p1"} <= set(result.offending)


def test_a_fleet_without_nvlink_domains_has_no_domain_rule(demo_cluster):
    assert "nvlink-domains" not in {result.name for result in evaluate_topology().rules}
