"""The services the dashboard calls: the rule summary, evaluated here before any record (tests/topology/test_recorded.py
has it read the record)."""

import pytest

from apps.inventory.choices import Plane
from apps.topology.services import evaluate_topology, rule_summary, topology_fingerprint
from tests.topology.helpers import nic, unplug_plane

pytestmark = pytest.mark.django_db


def test_rule_summary_lists_every_rule(demo_cluster):
    summary = rule_summary()
    assert summary.total == len(summary) == 6 and summary.passed == 6
    assert summary.all_passed and summary.failing == []
    assert [rule.name for rule in summary][:2] == ["pair-bandwidth", "dual-plane"]


def test_rule_summary_sees_saved_changes_at_once(demo_cluster):
    before = topology_fingerprint()
    assert rule_summary().all_passed
    port = nic("gpu003", "ens2np0")
    port.mtu = 1500
    port.save()
    assert topology_fingerprint() != before
    summary = rule_summary()
    assert [rule.name for rule in summary.failing] == ["data-mtu"] and summary.passed == 5


def test_rule_summary_sees_deleted_cables(demo_cluster):
    assert rule_summary().all_passed
    unplug_plane("gpu030", Plane.A)
    assert {rule.name for rule in rule_summary().failing} == {"pair-bandwidth", "dual-plane"}


def test_report_summary(demo_cluster):
    report = evaluate_topology()
    summary = report.summary
    assert (summary.nodes, summary.compute_nodes, summary.management_nodes, summary.switches) == (35, 32, 3, 13)
    # 32 x 4 + 3 node cables and 4 leaves x 32 uplinks per plane, 400G each.
    assert summary.capacity_gbps_by_plane == {"A": (131 + 128) * 400, "B": (131 + 128) * 400, "mgmt": 35 * 25}
    assert summary.cables == 553 and summary.planes == ["A", "B", "mgmt"]
