"""Fleet health: per node, healthy or not and why; and one number from 0 to 100 with its breakdown.

Reads the inventory (node status, GPU health), the node's open health events (apps/health: what every producer
recorded; critical and major ones make it unhealthy, minor ones degraded), the scheduler's last view of each node
(drained outside Rackpilot, down or unknown there: apps/schedulers), open findings (discovery's differences — a GPU a
discovery found missing is not healthy however the inventory rates it —, diagnosis's unresolved incidents), the
telemetry (XID, ECC) and the SLOs. The number judges the nodes in production; nodes still being brought up or retired
are counted apart. Reads only. `GET /api/health/` serves it to schedulers; the dashboard shows the
number.
"""

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from apps.core.text import counted
from apps.diagnosis.models import Incident
from apps.discovery.choices import DifferenceState
from apps.discovery.models import Difference
from apps.health import services as health_events
from apps.health.choices import NodeState
from apps.inventory.census import gpu_census
from apps.inventory.choices import GpuHealth, NodeRole, NodeStatus, PowerState
from apps.inventory.models import Gpu, Node
from apps.monitoring import services
from apps.monitoring.models import Slo
from apps.schedulers import health_events as scheduler_events
from apps.schedulers.choices import DifferenceKind
from apps.schedulers.services import scheduler_differences

# The number: each part's share of 100 (the parts are 0..1).
WEIGHTS = {"gpus_healthy": 40, "nodes_healthy": 30, "slos_met": 20, "no_open_incidents": 5, "no_drift": 5}
SERVING_STATUSES = {NodeStatus.READY}
# The fleet the number judges: nodes in production, well or not. A node still being brought up (planned, racked,
# provisioning) or retired is not healthy to a scheduler, but it is no fault of the fleet's: counted apart.
PRODUCTION_STATUSES = {NodeStatus.READY, NodeStatus.DEGRADED, NodeStatus.FAILED}


@dataclass
class NodeHealth:
    hostname: str
    status: str = NodeStatus.READY
    healthy: bool = True
    reasons: list[str] = field(default_factory=list)
    state: str = NodeState.HEALTHY
    events: list = field(default_factory=list)  # its open health events, worst first
    bad_gpus: set = field(default_factory=set)  # indexes of its GPUs found unhealthy, by whatever said so

    @property
    def in_production(self) -> bool:
        return self.status in PRODUCTION_STATUSES

    def fail(self, reason: str) -> None:
        self.healthy = False
        self.state = NodeState.UNHEALTHY
        self.reasons.append(reason)

    def degrade(self, reason: str) -> None:
        if self.state == NodeState.HEALTHY:
            self.state = NodeState.DEGRADED
        self.reasons.append(reason)


def node_health(*, with_telemetry: bool = True, hostname: str | None = None) -> list[NodeHealth]:
    """Every compute node's health, or only `hostname`'s (empty when it is no compute node). Each source is one query
    that names the nodes by a subquery (not a list of thousands of ids) and fetches only the rows that say something."""
    compute = Node.objects.filter(role=NodeRole.COMPUTE)
    if hostname is not None:
        compute = compute.filter(hostname=hostname)
    # From the read's GPU census, which lists every node (by hostname) once a read: tuples, a fleet has thousands.
    census = gpu_census(hostname=hostname).compute_nodes
    nodes = [(node.pk, node.hostname, node.status) for node in census]
    by_id = {pk: NodeHealth(hostname, status) for pk, hostname, status in nodes}
    for node in census:
        if node.status not in SERVING_STATUSES:
            by_id[node.pk].fail(f"status is {NodeStatus(node.status).label.lower()}")
        if node.power_state == PowerState.OFF:  # a leak's trays powered off, a node powered down for repair
            by_id[node.pk].fail("powered off (its BMC reads it off)")
    for node_id, events in health_events.open_events_by_node(compute).items():
        by_id[node_id].events = events
        for event in events:
            judged = health_events.state_of([event])
            if judged == NodeState.UNHEALTHY:
                by_id[node_id].fail(event.reason)
                if event.gpu_id:
                    by_id[node_id].bad_gpus.add(event.gpu.index)
            elif judged == NodeState.DEGRADED:
                by_id[node_id].degrade(event.reason)
            else:
                by_id[node_id].reasons.append(event.reason)  # for information: the node stays as it was
    # A switch tray's fault is in no node (apps/monitoring/nvlink_watch.py): the trays of its domain work on with
    # fewer links, so they are degraded, not unhealthy.
    down = defaultdict(list)  # domain id -> its switch trays' open events' reasons
    for event in (
        health_events.open_events().filter(nvlink_switch_tray__isnull=False).select_related("nvlink_switch_tray")
    ):
        down[event.nvlink_switch_tray.domain_id].append(event.reason)
    if down:  # one query for every domain's trays, and none at all while no switch tray is down
        for pk, domain_id in compute.filter(nvlink_domain__in=list(down)).values_list("pk", "nvlink_domain_id"):
            for reason in down[domain_id]:
                by_id[pk].degrade(reason)
    # Gpu.health follows its open events (apps/health writes it): a GPU with one is judged above, by its events.
    judged = {event.gpu_id for node in by_id.values() for event in node.events if event.gpu_id}
    unhealthy = Gpu.objects.filter(node__in=compute).exclude(health=GpuHealth.HEALTHY).exclude(pk__in=judged)
    for gpu in unhealthy.order_by("index"):
        by_id[gpu.node_id].fail(f"GPU {gpu.index} is {gpu.get_health_display().lower()}")
        by_id[gpu.node_id].bad_gpus.add(gpu.index)
    missing = defaultdict(int)
    for difference in Difference.objects.filter(node__in=compute, state=DifferenceState.OPEN):
        if difference.field == "present" and difference.discovered == "missing":
            by_id[difference.node_id].fail(f"{difference.object_key} missing (found by discovery)")
        else:
            missing[difference.node_id] += 1
    for node_id, count in missing.items():
        by_id[node_id].reasons.append(f"{counted(count, 'open difference')} from the inventory")  # drift, not unhealthy
    names = {hostname: pk for pk, hostname, _ in nodes}
    for difference in scheduler_differences(nodes=compute):
        node = by_id[names[difference.hostname]]
        said = difference.kind in (DifferenceKind.DRAINED_OUTSIDE, DifferenceKind.DOWN)
        if said and any(event.kind == scheduler_events.KIND for event in node.events):
            continue  # the scheduler's open event says it already (apps/schedulers/health_events.py)
        # Drained in the scheduler is a reason to show, not a fault of the node; down or unknown there is, and so is
        # a condition a problem detector raised (node-problem-detector's, the GPU Operator's).
        if difference.kind in (DifferenceKind.DOWN, DifferenceKind.ABSENT, DifferenceKind.CONDITION):
            by_id[names[difference.hostname]].fail(difference.message)
        else:
            by_id[names[difference.hostname]].reasons.append(difference.message)
    for incident in Incident.objects.unresolved().filter(node__in=compute).only("node_id", "title", "state"):
        what = "open" if incident.active else "unresolved"
        by_id[incident.node_id].fail(f"{what} incident: {incident.title}")
    if with_telemetry:
        flags = services.telemetry_health(hostname=hostname)
        for flagged in flags["flagged"]:
            what = f"XID {flagged['xid']}" if flagged["xid"] else counted(flagged["ecc"], "uncorrectable ECC error")
            node = by_id.get(names.get(flagged["node"].hostname))
            if node is not None and int(flagged["gpu"]) not in node.bad_gpus:  # an open event says it already
                node.fail(f"GPU {flagged['gpu']} reports {what}")
                node.bad_gpus.add(int(flagged["gpu"]))
    return list(by_id.values())


def fleet_health(*, with_slos: bool = True) -> dict:
    """The number and its breakdown; each part is a share from 0 to 1 and says what it counted."""
    every_node = node_health()
    nodes = [node for node in every_node if node.in_production]
    gpu_total = gpu_census().compute_gpus(statuses=PRODUCTION_STATUSES)
    flagged_gpus = sum(len(node.bad_gpus) for node in nodes)
    gpu_ok = max(0, gpu_total - flagged_gpus)
    node_ok = sum(node.healthy for node in nodes)
    open_incidents = Incident.objects.unresolved().count()
    not_in_production = Counter(node.status for node in every_node if not node.in_production)
    drifting = sum(1 for node in nodes if any("open difference" in reason for reason in node.reasons))
    slo_rows = list(Slo.objects.select_related("service", "training_job", "rack")) if with_slos else []
    met = services.slos_met(slo_rows, window="1h")
    judged = [value for value in met if value is not None]
    parts = {
        "gpus_healthy": (gpu_ok / gpu_total if gpu_total else 1.0, f"{gpu_ok} of {gpu_total} GPUs"),
        "nodes_healthy": (
            node_ok / len(nodes) if nodes else 1.0,
            f"{node_ok} of {counted(len(nodes), 'compute node')} in production",
        ),
        "slos_met": (sum(judged) / len(judged) if judged else 1.0, f"{sum(judged)} of {len(judged)} SLOs met (1 h)"),
        "no_open_incidents": (
            1.0 if not open_incidents else max(0.0, 1 - open_incidents / max(len(nodes), 1)),
            counted(open_incidents, "unresolved incident"),
        ),
        "no_drift": (
            1 - drifting / len(nodes) if nodes else 1.0,
            f"{counted(drifting, 'node')} differing from the inventory",
        ),
    }
    score = round(sum(WEIGHTS[name] * share for name, (share, _) in parts.items()))
    return {
        "score": score,
        "breakdown": [
            {"part": name, "weight": WEIGHTS[name], "share": round(share, 4), "counted": counted}
            for name, (share, counted) in parts.items()
        ],
        "nodes": every_node,
        "not_in_production": {str(status): not_in_production[status] for status in sorted(not_in_production)},
    }


def dashboard_panel() -> dict:
    report = fleet_health()
    outside = [f"{count} {NodeStatus(status).label.lower()}" for status, count in report["not_in_production"].items()]
    unhealthy = [node for node in report["nodes"] if node.in_production and not node.healthy]
    return {**report, "unhealthy": unhealthy, "outside": outside}
