"""Where the GPU-hours go: every GPU-hour of a window split into busy (SM-active weighted), allocated but idle, and
unallocated, per workload, node and rack, from the telemetry interface. Reads only.

- Every compute GPU in the inventory offers the window's length in GPU-hours.
- Busy is its SM-active integral (`DCGM_FI_PROF_SM_ACTIVE`, 0..1, over the window): a card busy on half its SMs for an
  hour is half a busy GPU-hour, whatever DCGM_FI_DEV_GPU_UTIL says (utilisation counts a kernel running at all). It
  is asked per node (its GPUs' busy GPU-seconds, `Telemetry.node_busy_seconds`: the record's 5-minute tiles).
- Allocated is the time a training job or an inference service in an active state held the GPU's node in the window,
  from when it started (its `started_at`, else its creation): a workload holds all GPUs of its nodes, as the
  simulator loads them and as exclusive node allocation does. A node both serve and train: training counts (the
  simulator's rule too).
- Allocated but idle is allocated minus busy; unallocated is the rest. The three add up to the GPU's hours.
"""

import uuid
from collections import defaultdict
from dataclasses import dataclass, field

from apps.inventory.census import gpu_census
from apps.inventory.choices import NodeRole
from apps.inventory.models import Node
from apps.monitoring.telemetry import Telemetry, TelemetryError, Window, telemetry
from apps.workloads.models import InferenceService, TrainingJob

HOUR = 3600.0


@dataclass(frozen=True)
class RackRef:
    name: str
    public_id: uuid.UUID


@dataclass(frozen=True)
class NodeRef:
    """What the split's pages and API show of a node: its name, its page's id and its rack."""

    hostname: str
    public_id: uuid.UUID
    rack: RackRef | None


@dataclass
class Split:
    """GPU-hours of one group (a workload, a node, a rack, the cluster)."""

    gpus: int = 0
    busy: float = 0.0
    allocated_idle: float = 0.0
    unallocated: float = 0.0

    @property
    def total(self) -> float:
        return self.busy + self.allocated_idle + self.unallocated

    def share(self, part: str) -> float | None:
        return getattr(self, part) / self.total if self.total > 0 else None

    @property
    def idle_share(self) -> float | None:
        """Allocated-but-idle hours over all hours: what fragmentation and idle holders cost."""
        return self.share("allocated_idle")

    def add(self, other: "Split") -> None:
        self.gpus += other.gpus
        self.busy += other.busy
        self.allocated_idle += other.allocated_idle
        self.unallocated += other.unallocated

    def as_dict(self) -> dict:
        return {
            "gpus": self.gpus,
            "gpu_hours": self.total,
            "busy": self.busy,
            "allocated_idle": self.allocated_idle,
            "unallocated": self.unallocated,
            "busy_share": self.share("busy"),
            "idle_share": self.idle_share,
            "unallocated_share": self.share("unallocated"),
        }


@dataclass
class GpuHours:
    window: Window
    source: str
    cluster: Split = field(default_factory=Split)
    workloads: list[dict] = field(default_factory=list)  # {"name", "kind", **split}
    nodes: list[dict] = field(default_factory=list)  # {"node", "rack", "workload", **split}
    racks: list[dict] = field(default_factory=list)  # {"rack", **split}


def holders(*, now: float) -> dict[str, tuple[str, str, float]]:
    """hostname -> (workload kind, name, since) for nodes an active workload holds (training over serving). Tuples,
    not model instances: a service or a job may hold thousands of nodes."""
    held: dict[str, tuple[str, str, float]] = {}
    served = InferenceService.objects.active().filter(nodes__isnull=False)
    for name, created, hostname in served.values_list("name", "created", "nodes__hostname"):
        held[hostname] = ("service", name, min(created.timestamp(), now))
    trained = TrainingJob.objects.active().filter(members__isnull=False)
    for name, created, started_at, hostname in trained.values_list(
        "name", "created", "started_at", "members__node__hostname"
    ):
        held[hostname] = ("training", name, min((started_at or created).timestamp(), now))
    return held


def split_gpu(*, hours: float, busy_hours: float, allocated_hours: float) -> Split:
    """One GPU's hours: busy as measured (never more than the window), allocated-idle the rest of its allocation."""
    busy = min(max(busy_hours, 0.0), hours)
    allocated_idle = max(0.0, min(allocated_hours, hours) - busy)
    return Split(gpus=1, busy=busy, allocated_idle=allocated_idle, unallocated=max(0.0, hours - busy - allocated_idle))


def split_node(*, gpus: int, hours: float, busy_hours: float, allocated_hours: float) -> Split:
    """A node's hours (its GPUs are allocated together): its GPUs' busy hours as measured, allocated-idle the rest
    of their allocation. The same as its GPUs' splits added up, unless a card was busier than it was allocated."""
    split = split_gpu(hours=gpus * hours, busy_hours=busy_hours, allocated_hours=gpus * allocated_hours)
    split.gpus = gpus
    return split


def gpu_hours(*, window: Window, source: Telemetry | None = None) -> GpuHours:
    """The window's GPU-hours split per workload, node and rack. TelemetryError when the telemetry cannot be read."""
    source = source or telemetry()
    # Names and ids only, not model instances: a fleet has thousands of nodes and the split reads nothing else.
    racks: dict[uuid.UUID, RackRef] = {}
    nodes = {
        pk: NodeRef(hostname, public_id, racks.setdefault(rack_id, RackRef(rack, rack_id)) if rack else None)
        for pk, hostname, public_id, rack, rack_id in Node.objects.filter(role=NodeRole.COMPUTE).values_list(
            "pk", "hostname", "public_id", "rack__name", "rack__public_id"
        )
    }
    # By hostname, as the census lists them; a node added since the query above waits for the next read.
    census = gpu_census().compute_nodes
    gpus = [(nodes[node.pk], node.gpu_count) for node in census if node.gpu_count and node.pk in nodes]
    hostnames = [node.hostname for node, _ in gpus]
    busy_seconds = source.node_busy_seconds(hostnames=hostnames, start=window.start, end=window.end) if gpus else {}
    held = holders(now=window.end)
    hours = window.span / HOUR
    result = GpuHours(window=window, source=source.source)
    by_rack: dict[str, dict] = {}
    by_workload: dict[tuple[str, str], Split] = defaultdict(Split)
    for node, count in gpus:
        holder = held.get(node.hostname)
        allocated = max(0.0, window.end - max(window.start, holder[2])) / HOUR if holder else 0.0
        split = split_node(
            gpus=count,
            hours=hours,
            busy_hours=busy_seconds.get(node.hostname, 0.0) / HOUR,
            allocated_hours=allocated,
        )
        result.cluster.add(split)
        result.nodes.append({"node": node, "rack": node.rack, "workload": holder[1] if holder else "", "split": split})
        if node.rack is not None:
            by_rack.setdefault(node.rack.name, {"rack": node.rack, "split": Split()})["split"].add(split)
        if holder:
            by_workload[(holder[0], holder[1])].add(split)
    result.racks = [by_rack[name] for name in sorted(by_rack)]
    result.workloads = [
        {"kind": kind, "name": name, "split": split} for (kind, name), split in sorted(by_workload.items())
    ]
    return result


def idle_holders(result: GpuHours, *, count: int = 5) -> list[dict]:
    """The nodes holding the most allocated-but-idle GPU-hours, most first."""
    rows = [row for row in result.nodes if row["split"].allocated_idle > 0]
    return sorted(rows, key=lambda row: (-row["split"].allocated_idle, row["node"].hostname))[:count]


DASHBOARD_WINDOW = "24h"


def dashboard_panel(*, end: float | None = None) -> dict:
    """The dashboard's figure: the share of the 24 h to `end` (now)'s GPU-hours allocated but idle, and who holds
    it."""
    try:
        result = gpu_hours(window=Window.named(DASHBOARD_WINDOW, end=end))
    except TelemetryError as error:
        return {"error": str(error), "window": DASHBOARD_WINDOW}
    return {
        "error": "",
        "window": DASHBOARD_WINDOW,
        "cluster": result.cluster,
        "holders": idle_holders(result),
        "source": result.source,
    }
