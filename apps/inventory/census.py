"""The fleet's GPUs counted by node and health in one pass over the GPU table.

The dashboard's panels each asked the GPU table a question of their own — GPUs by health, nodes short of GPUs, a
compute node's GPUs for its GPU-hours, the GPUs in production for the fleet's number, the healthy GPUs and their
nodes for the telemetry's check —, six scans of 16,000 rows at fleet size. The census answers them all from one
count per node and health, kept for the read (apps/core/reads) so that every panel of a page shares it."""

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from uuid import UUID

from django.db.models import Count

from apps.core.reads import kept_for_this_read
from apps.inventory.choices import GpuHealth, NodeRole
from apps.inventory.models import Gpu, Node


@dataclass(slots=True)
class CensusNode:
    pk: int
    hostname: str
    public_id: UUID
    role: str
    status: str
    expected_gpu_count: int
    power_state: str  # as its BMC last read it; blank: never read
    gpus: dict[str, int] = field(default_factory=dict)  # health -> how many of its GPUs (none: not there)
    gpu_count: int = 0

    @property
    def present(self) -> int:
        """Its GPUs in the inventory but those found missing."""
        return self.gpu_count - self.gpus.get(GpuHealth.MISSING, 0)


@dataclass
class GpuCensus:
    nodes: list[CensusNode]  # by hostname
    by_health: Counter  # every GPU's health counted, whatever node it is in

    @cached_property
    def compute_nodes(self) -> list[CensusNode]:
        return [node for node in self.nodes if node.role == NodeRole.COMPUTE]

    def compute_gpus(self, *, statuses: Iterable[str] | None = None) -> int:
        """The GPUs of the compute nodes (in `statuses` where given)."""
        wanted = None if statuses is None else set(statuses)
        return sum(node.gpu_count for node in self.compute_nodes if wanted is None or node.status in wanted)

    def hostnames_with(self, health: str) -> list[str]:
        """The nodes with at least one GPU of that health."""
        return [node.hostname for node in self.nodes if health in node.gpus]

    def short_of_gpus(self) -> list[CensusNode]:
        """Compute nodes with fewer GPUs present than they should have."""
        return [node for node in self.compute_nodes if node.present < node.expected_gpu_count]


def gpu_census(*, hostname: str | None = None) -> GpuCensus:
    """The census of the fleet (or of `hostname`'s node only), worked out once a read request."""
    return kept_for_this_read(("gpu_census", hostname), lambda: _count(hostname))


def _count(hostname: str | None) -> GpuCensus:
    nodes, gpus = Node.objects.all(), Gpu.objects.all()
    if hostname is not None:
        nodes, gpus = nodes.filter(hostname=hostname), gpus.filter(node__hostname=hostname)
    # Tuples, not model instances: a fleet has thousands of nodes.
    columns = ("pk", "hostname", "public_id", "role", "status", "expected_gpu_count", "power_state")
    by_pk = {row[0]: CensusNode(*row) for row in nodes.order_by("hostname").values_list(*columns)}
    by_health = Counter()
    # COUNT(*), not of the ids: PostgreSQL counts from the (node, health) index alone.
    for node_id, health, count in gpus.values_list("node_id", "health").annotate(n=Count("*")).order_by():
        node = by_pk.get(node_id)
        if node is not None:  # not a node added between the two queries
            node.gpus[health] = count
            node.gpu_count += count
            by_health[health] += count
    return GpuCensus(list(by_pk.values()), by_health)
