"""The GPU census: the fleet's GPUs counted by node and health once, for every panel of a page that asks."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.core.reads import ReadScope
from apps.inventory.census import gpu_census
from apps.inventory.choices import GpuHealth, NodeStatus
from apps.inventory.models import Gpu, Node
from tests import factories

pytestmark = pytest.mark.django_db


def make_node(hostname: str, *, gpus: int, **fields) -> Node:
    """A compute node that should have 8 GPUs, with `gpus` healthy ones."""
    node = factories.make_node(hostname=hostname, expected_gpu_count=8, **fields)
    for index in range(gpus):
        factories.make_gpu(node=node, index=index)
    Gpu.objects.filter(node=node).update(health=GpuHealth.HEALTHY)
    return node


def test_the_census_counts_each_node_s_gpus_by_health():
    full = make_node("gpu001", gpus=8, status=NodeStatus.READY)
    short = make_node("gpu002", gpus=8, status=NodeStatus.PROVISIONING)
    Gpu.objects.filter(node=short, index__in=[3, 5]).update(health=GpuHealth.MISSING)
    Gpu.objects.filter(node=short, index=6).update(health=GpuHealth.FAILED)
    make_node("gpu003", gpus=0)

    census = gpu_census()

    assert [node.hostname for node in census.nodes] == ["gpu001", "gpu002", "gpu003"]
    assert census.by_health == {GpuHealth.HEALTHY: 13, GpuHealth.MISSING: 2, GpuHealth.FAILED: 1}
    assert [(node.hostname, node.present) for node in census.short_of_gpus()] == [("gpu002", 6), ("gpu003", 0)]
    assert census.compute_gpus() == 16
    assert census.compute_gpus(statuses={NodeStatus.READY}) == 8
    assert census.hostnames_with(GpuHealth.FAILED) == ["gpu002"]
    assert gpu_census(hostname="gpu001").by_health == {GpuHealth.HEALTHY: 8}
    assert [node.pk for node in gpu_census(hostname="gpu001").nodes] == [full.pk]


def test_a_read_counts_once_and_anything_else_afresh():
    make_node("gpu001", gpus=8)
    with ReadScope("GET"):
        first = gpu_census()
        make_node("gpu002", gpus=8)
        assert gpu_census() is first  # a read never writes: what it counted holds for the request
    assert gpu_census().compute_gpus() == 16


def counts_gpus(sql: str) -> bool:
    """A query counting the GPU table's rows: per node or health (COUNT of its ids), or all of them."""
    return 'COUNT("inventory_gpu".' in sql or (
        sql.split(" FROM ", 1)[-1].startswith('"inventory_gpu"') and "COUNT(*)" in sql
    )


def test_the_dashboard_counts_the_gpu_table_once(browser_as, viewer, demo_cluster):
    Gpu.objects.filter(node__hostname="gpu003", index=2).update(health=GpuHealth.FAILED)
    Gpu.objects.filter(node__hostname="gpu004", index=7).update(health=GpuHealth.MISSING)
    client = browser_as(viewer)

    with CaptureQueriesContext(connection) as queries:
        page = client.get("/")

    assert page.status_code == 200
    counted = [query["sql"] for query in queries if counts_gpus(query["sql"])]
    assert len(counted) == 1, counted  # the census; every panel reads it
    assert [(node.hostname, node.present) for node in page.context["nodes_missing_gpus"]] == [("gpu004", 7)]
    assert [str(gpu) for gpu in page.context["unhealthy_gpus"]] == ["gpu003 GPU2", "gpu004 GPU7"]
