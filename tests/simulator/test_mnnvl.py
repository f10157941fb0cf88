"""NCCL across the trays of a rack-scale NVLink domain runs over NVLink (MNNVL), not the data NICs: all_reduce at the
public GB200 figure's share of the GPUs' raw NVLink bandwidth, held down by the GPU with the fewest working links (a
switch tray down costs every GPU two of its 18). Trays of two domains, or a tray and an H200 node, go over the NICs."""

import pytest

from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node
from apps.simulator import services
from apps.simulator.model import MNNVL_ALL_REDUCE_EFFICIENCY, NCCL_NVLINK_EFFICIENCY, one_nvlink_domain, ring_model

pytestmark = pytest.mark.django_db

RAW_GB200 = 18 * 50.0  # 18 NVLink 5 links at 50 GB/s each way


def states(*hostnames):
    return [services.node_state(node=Node.objects.get(hostname=hostname)) for hostname in hostnames]


@pytest.fixture
def nvl72():
    load_cluster(ClusterShape(compute_nodes=8, rack_scale_racks=1))


def test_all_reduce_across_trays_runs_over_nvlink_at_the_mnnvl_figure(nvl72):
    trays = states("nvl01-t01", "nvl01-t02")
    assert one_nvlink_domain(trays)

    model = ring_model("all_reduce", trays, 4)

    assert model.ranks == 8 and model.peak_busbw_gb_per_s == pytest.approx(RAW_GB200 * MNNVL_ALL_REDUCE_EFFICIENCY)
    gather = ring_model("all_gather", trays, 4)
    assert gather.peak_busbw_gb_per_s == pytest.approx(RAW_GB200 * NCCL_NVLINK_EFFICIENCY)


def test_a_switch_tray_down_slows_the_domain_by_its_share_of_the_links(nvl72):
    services.inject_fault(node=Node.objects.get(hostname="nvl01-t05"), kind="nvswitch_tray_down", target="3")

    model = ring_model("all_reduce", states("nvl01-t01", "nvl01-t02"), 4)

    assert model.peak_busbw_gb_per_s == pytest.approx(16 * 50.0 * MNNVL_ALL_REDUCE_EFFICIENCY)


def test_a_tray_with_an_h200_node_goes_over_the_nics(nvl72):
    mixed = states("nvl01-t01", "gpu001")
    assert not one_nvlink_domain(mixed)
    assert ring_model("all_reduce", mixed, 4).peak_busbw_gb_per_s < 400
