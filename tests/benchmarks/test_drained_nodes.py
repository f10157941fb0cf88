"""A benchmark over a rack or tag leaves drained nodes out (apps.jobs.services.resolve_selection)."""

import pytest
from django.utils import timezone

from apps.benchmarks.models import Measurement
from apps.inventory.models import Node, Tag

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_tag_wide_benchmark_skips_the_drained_node(run_suite):
    tag = Tag.objects.create(name="Bench", slug="bench")
    pair = list(Node.objects.filter(hostname__in=["gpu001", "gpu002"]))
    for node in pair:
        node.tags.add(tag)
    Node.objects.filter(hostname="gpu002").update(drained_at=timezone.now(), drain_reason="fan")

    run = run_suite("nvbandwidth", "tag:bench")

    assert [n.hostname for n in run.nodes.all()] == ["gpu001"]
    assert run.target_spec["drained_left_out"] == ["gpu002"]
    measured = set(Measurement.objects.filter(run=run).values_list("launcher", flat=True))
    assert measured == {"gpu001"} and run.status == "succeeded"
