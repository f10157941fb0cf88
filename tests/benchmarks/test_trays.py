"""A sweep's suspects on the trays of an NVLink domain are named by their tray; where every tray it tested is bad, the
suspects point at the domain's switch trays first. Suspects outside a domain are left as they were."""

import pytest

from apps.benchmarks.choices import Suite, Verdict
from apps.benchmarks.models import BenchmarkRun, Suspect
from apps.benchmarks.trays import name_trays
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node

pytestmark = pytest.mark.django_db

TRAYS = ["nvl01-t01", "nvl01-t02", "nvl01-t03", "nvl01-t04"]


@pytest.fixture
def run():
    load_cluster(ClusterShape(compute_nodes=8, rack_scale_racks=1))
    run = BenchmarkRun.objects.create(suite=Suite.SWEEP, transport="sim")
    run.nodes.set(Node.objects.filter(hostname__in=[*TRAYS, "gpu001", "gpu002"]))
    return run


def suspect(run, hostname: str) -> Suspect:
    node = Node.objects.get(hostname=hostname)
    return Suspect.objects.create(run=run, node=node, verdict=Verdict.FAIL, cause="slow across nodes (no rail test)")


def test_a_suspect_tray_is_named_as_the_compute_tray_to_isolate(run):
    suspect(run, "nvl01-t02")
    suspect(run, "gpu001")

    assert name_trays(run) == 1

    tray = Suspect.objects.get(node__hostname="nvl01-t02")
    assert tray.cause.startswith("compute tray nvl01-t02 (slot 2 of NVLink domain nvl01); slow across nodes")
    assert tray.evidence["tray"] == {
        "domain": "nvl01",
        "compute_tray": "nvl01-t02",
        "slot": 2,
        "isolate": "compute tray",
        "switch_trays": [],
    }
    assert Suspect.objects.get(node__hostname="gpu001").cause == "slow across nodes (no rail test)"


def test_every_tested_tray_bad_points_at_the_domains_switch_trays(run):
    for hostname in TRAYS[:3]:
        suspect(run, hostname)
    run.parameters = {"unresolved": [TRAYS[3]]}
    run.save()

    assert name_trays(run) == 3

    first = Suspect.objects.get(node__hostname="nvl01-t01")
    assert first.evidence["tray"]["isolate"] == "switch trays"
    assert first.evidence["tray"]["switch_trays"] == [f"nvl01-sw{slot}" for slot in range(1, 10)]
    assert first.cause.startswith(
        "every tested tray of NVLink domain nvl01 is bad: suspect its switch trays (nvl01-sw1, nvl01-sw2"
    )
