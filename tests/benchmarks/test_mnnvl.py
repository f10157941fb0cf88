"""NCCL across the trays of a GB200 NVL72 is judged against the shipped MNNVL reference (not the data NICs'): a whole
domain passes near the public figure, a switch tray down (two of every GPU's 18 links) warns."""

import pytest

from apps.benchmarks import services
from apps.benchmarks.choices import GIB, Verdict
from apps.benchmarks.references import MNNVL
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node
from apps.simulator import services as simulator

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def nvl72(shipped_references):
    load_cluster(ClusterShape(compute_nodes=8, rack_scale_racks=1))


def all_reduce(nodes: str):
    run = services.start_run(
        suite="nccl",
        targets=services.parse_nodes(nodes),
        transport="sim",
        queue=False,
        min_bytes=GIB,
        max_bytes=4 * GIB,
    )
    return services.execute_run(run=run).tests.get()


def test_all_reduce_across_trays_is_judged_against_the_mnnvl_reference(nvl72):
    test = all_reduce("nvl01-t01,nvl01-t02,nvl01-t03,nvl01-t04")

    assert test.run.fabric == MNNVL  # the run says what it ran over, as its reference does (it said roce-4x400g)
    assert (test.reference.sku_name, test.reference.fabric, test.reference.expected_gb_per_s) == ("GB200", MNNVL, 811.0)
    assert "lixueduan.com" in test.reference.source
    assert test.verdict == Verdict.PASS and 780 < test.busbw_gb_per_s < 830


def test_a_switch_tray_down_warns(nvl72):
    simulator.inject_fault(node=Node.objects.get(hostname="nvl01-t09"), kind="nvswitch_tray_down", target="5")

    test = all_reduce("nvl01-t01,nvl01-t02")

    assert test.reference.fabric == MNNVL and test.verdict == Verdict.WARN


def test_a_run_across_domains_or_over_one_tray_names_the_data_nics(nvl72):
    from apps.benchmarks.references import fabric_across

    trays = list(Node.objects.filter(hostname__in=["nvl01-t01", "nvl01-t02"]).order_by("hostname"))
    h200 = Node.objects.get(hostname="gpu001")
    assert fabric_across(trays) == MNNVL
    assert fabric_across(trays[:1]) != MNNVL and fabric_across([trays[0], h200]) != MNNVL
