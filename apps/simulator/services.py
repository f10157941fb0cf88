"""The simulated cluster's services: run a command on a simulated node, run nccl-tests across nodes, manage faults."""

import threading
import time

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Prefetch
from rest_framework import serializers

from apps.core.models import AuditEntry
from apps.inventory.choices import NodeRole, NodeStatus
from apps.inventory.models import Nic, Node
from apps.simulator import boot, clock, sel, shell
from apps.simulator.changes import VOLATILE_PREFIXES, apply_changes
from apps.simulator.choices import FaultKind
from apps.simulator.faults.kinds import fault_kind
from apps.simulator.faults.node import apply_faults, check_target
from apps.simulator.faults.spec import FaultError
from apps.simulator.models import SimChange, SimFault, SimServingLoad
from apps.simulator.serving import ServingLedger
from apps.simulator.state import (
    FabricReads,
    SimulatedNode,
    build_state,
    data_leaves,
    leaf_pods,
    leaf_uplink_ratios,
)
from apps.simulator.telemetry import ClusterTelemetry, NodeHistory, TimedChange, TimedFault
from apps.simulator.terminal import ClusterHost, CommandOutput, Context
from apps.simulator.tools import nccl

__all__ = [
    "CommandOutput",
    "clear_all",
    "clear_changes",
    "clear_fault",
    "clear_faults",
    "inject_fault",
    "NodeSession",
    "append_sel",
    "bmc_power",
    "power_is_on",
    "sel_records",
    "node_state",
    "reboot",
    "run_command",
    "run_nccl_tests",
    "serving_ledger",
    "store_serving_load",
    "telemetry_model",
]


def _with_parts():
    """Nodes with what their state is built from, prefetched (the same few queries for one node or thousands)."""
    nics = Nic.objects.select_related("cable_as_a", "cable_as_b")
    return Node.objects.prefetch_related(
        "gpus__sku", Prefetch("nics", queryset=nics), "firmware", "volumes__tier", "sim_faults", "sim_changes"
    )


def _loaded(node: Node) -> Node:
    return _with_parts().get(pk=node.pk)


def _state_of(node: Node, ratios: dict | None = None, pods: dict | None = None) -> SimulatedNode:
    """A loaded node's state now: its inventory, its faults, then the changes commands made."""
    return apply_changes(apply_faults(build_state(node, ratios, pods), node.sim_faults.all()), node.sim_changes.all())


def node_state(*, node: Node, fabric: FabricReads | None = None) -> SimulatedNode:
    """The node as the simulator sees it now: its inventory, its faults, then the changes commands made. `fabric`:
    its leaves' figures read through it (shared with other nodes' sessions), else read for this node alone."""
    node = _loaded(node)
    return _state_of(node, *fabric.of(data_leaves(node))) if fabric is not None else _state_of(node)


def node_states(*, hostnames, fabric: FabricReads | None = None) -> dict[str, SimulatedNode]:
    """The states of many nodes by host name (those that exist), as node_state builds each, in a number of queries
    that does not grow with the nodes: a launcher reaching 2,048 nodes reads them together, not one by one."""
    return {node.hostname: state for node, state in _states_of(hostnames, fabric)}


def _states_of(hostnames, fabric: FabricReads | None) -> list[tuple[Node, SimulatedNode]]:
    nodes = list(_with_parts().filter(hostname__in=set(hostnames)))
    leaves = set().union(*(data_leaves(node) for node in nodes))
    ratios, pods = fabric.of(leaves) if fabric is not None else (leaf_uplink_ratios(leaves), leaf_pods(leaves))
    return [(node, _state_of(node, ratios, pods)) for node in nodes]


def _seen_in(node: Node) -> tuple:
    """NodeSession._seen's answer, from a loaded node's prefetched faults and changes."""
    return tuple(
        value
        for rows in (node.sim_faults.all(), node.sim_changes.all())
        for value in (len(rows), max((row.updated for row in rows), default=None))
    )


class FanOutReads:
    """What the sim transport's sessions of one fan-out read together: the states of the nodes whose sessions are
    open and not read yet, in one batch when the first of them needs its own (the fan-out opens a window of 64
    before any answers), and the leaves' fabric figures. A session still asks whether its node's faults or changes
    moved since the batch read it (NodeSession._seen), and reads it afresh if they did."""

    def __init__(self):
        self.fabric = FabricReads()
        self._opened: set[str] = set()
        self._read: dict[str, tuple[SimulatedNode, tuple]] = {}
        self._lock = threading.Lock()  # the sessions answer in threads

    def opened(self, hostname: str) -> None:
        with self._lock:
            self._opened.add(hostname)

    def take(self, hostname: str) -> tuple[SimulatedNode, tuple] | None:
        """The node's state read in a batch, and what NodeSession._seen said then; None: not read that way."""
        with self._lock:
            if hostname not in self._read and hostname in self._opened:
                batch, self._opened = self._opened, set()
                self._read.update(
                    {node.hostname: (state, _seen_in(node)) for node, state in _states_of(batch, self.fabric)}
                )
            return self._read.pop(hostname, None)


_UNREAD = object()


class NodeSession:
    """Commands on one simulated node over one connection (the sim transport opens one per node and shard).

    The node's state (inventory, faults, stored changes) is built when a command first needs it and kept for the
    session's later commands; at most every `recheck_seconds` two small queries ask whether the node's faults or
    stored changes moved meanwhile, and only then is it rebuilt. So a fault injected while a job runs shows within a
    second, and a command costs no database work in between (the sim transport's threads would open a connection
    for every query). The session's own changes are applied to the state at once and stored. An edit of the
    inventory itself (a GPU row changed) shows from the next session on; the fabric's figures (leaf uplink ratios,
    pods), when the sessions of a fan-out share a FanOutReads, from the next fan-out on.
    """

    recheck_seconds = 1.0

    def __init__(
        self,
        node: Node,
        *,
        seed: int = 0,
        load: float = 0.0,
        real_time: bool = False,
        shared: FanOutReads | None = None,
    ):
        self.node, self.seed, self.load = node, seed, max(0.0, min(load, 1.0))
        self.real_time = real_time
        self.shared = shared  # what the other sessions of a fan-out read with this one, when the transport offers it
        self.fabric = shared.fabric if shared is not None else None
        self._state: SimulatedNode | None = None
        self._state_seen: tuple = ()
        self._checked = 0.0
        self._peers: dict[str, SimulatedNode | None] = {}
        self._hosts: list[ClusterHost] | None = None
        self._boot = _UNREAD
        self._off = _UNREAD

    def _seen(self) -> tuple:
        """What can change under an open session: the node's faults and stored changes (how many, last update)."""
        faults = self.node.sim_faults.aggregate(count=Count("pk"), last=Max("updated"))
        changes = self.node.sim_changes.aggregate(count=Count("pk"), last=Max("updated"))
        return (*faults.values(), *changes.values())

    def _current_state(self) -> SimulatedNode:
        now = time.monotonic()
        if self._state is not None and now - self._checked < self.recheck_seconds:
            return self._state
        seen, self._checked = self._seen(), now
        if self._state is None and self.shared is not None:
            self._state, self._state_seen = self.shared.take(self.node.hostname) or (None, ())
        if self._state is None or seen != self._state_seen:
            self._state, self._state_seen = node_state(node=self.node, fabric=self.fabric), seen
        return self._state

    def _peer_state(self, hostname: str) -> SimulatedNode | None:
        """Another node's state for a launcher on this one (mpirun -H), read once per session; None: no such host."""
        if hostname == self.node.hostname:
            return self._current_state()
        if hostname not in self._peers:
            self._read_peers([hostname])
        return self._peers[hostname]

    def _read_peers(self, hostnames: list[str]) -> None:
        """The states of the other nodes a launcher is about to reach, those not read yet, all in one read."""
        unread = {name for name in hostnames if name != self.node.hostname and name not in self._peers}
        if unread:
            states = node_states(hostnames=unread, fabric=self.fabric)
            self._peers.update({name: states.get(name) for name in unread})

    def _cluster(self) -> list[ClusterHost]:
        """The compute nodes a scheduler on this node declares (one query, read once per session)."""
        if self._hosts is None:
            rows = (
                Node.objects.filter(role=NodeRole.COMPUTE)
                .exclude(status=NodeStatus.RETIRED)
                .annotate(gpu_rows=Count("gpus"))
                .order_by("hostname")
                .values_list("hostname", "cpu_cores", "gpu_rows", "expected_gpu_count", "memory_gib")
            )
            self._hosts = [
                ClusterHost(name, cores or 16, gpus or expected, memory * 1024)  # 16: build_state's default
                for name, cores, gpus, expected, memory in rows
            ]
        return self._hosts

    def _last_boot(self) -> dict | None:
        """The node's last simulated reboot, read once per session (one small query, so `true` stays cheap)."""
        if self._boot is _UNREAD:
            self._boot = _last_boot(self.node)
        return self._boot

    def _powered_off(self) -> bool:
        """Whether the BMC turned the chassis off, read once per session."""
        if self._off is _UNREAD:
            self._off = not power_is_on(self.node)
        return self._off

    def run(self, argv: list[str]) -> CommandOutput:
        if self._powered_off():  # off through its BMC: the node's address answers nothing
            return CommandOutput(255, "", boot.POWERED_OFF.format(host=self.node.hostname))
        if boot.is_down(self._last_boot()):  # rebooting: nothing answers on the node's port
            return CommandOutput(255, "", boot.REFUSED.format(host=self.node.hostname))
        if self._current_state().os_hung:  # the kernel hung (a node_hang fault): the connection times out
            return CommandOutput(255, "", boot.HUNG.format(host=self.node.hostname))
        context = Context(
            loader=self._current_state,
            hostname=self.node.hostname,
            seed=self.seed,
            load=self.load,
            peers=self._peer_state,
            read_peers=self._read_peers,
            real_time=self.real_time,
            cluster=self._cluster,
        )
        result = shell.run(context, [str(word) for word in argv])
        if context.changes:  # applied to the state already; stored, they make the next command rebuild it
            _store_changes([SimChange(node=self.node, key=key, value=value) for key, value in context.changes.items()])
        if context.peer_changes:  # what a launcher's command did on the other nodes it reached
            peers = Node.objects.in_bulk(list(context.peer_changes), field_name="hostname")
            _store_changes(
                [
                    SimChange(node=peers[hostname], key=key, value=value)
                    for hostname, changes in context.peer_changes.items()
                    for key, value in changes.items()
                ]
            )
        if context.reboot_requested:
            reboot(node=self.node, seed=self.seed, down_seconds=settings.RACKPILOT_SIM_REBOOT_SECONDS)
            self._state, self._boot = None, _UNREAD  # the node comes back as a new boot: read it afresh
        return result


def _store_changes(changes: list[SimChange]) -> None:
    """Store changes, each replacing its node's change of that key (its `updated` moves, so an open session sees
    it): one statement per batch, not one per change (a run across 2,048 nodes counts traffic on 16,384 NICs)."""
    SimChange.objects.bulk_create(
        changes, update_conflicts=True, unique_fields=["node", "key"], update_fields=["value", "updated"]
    )


def run_command(*, node: Node, argv: list[str], seed: int = 0, load: float = 0.0) -> CommandOutput:
    """What the simulated node answers to argv, read afresh. `load` (0 idle .. 1 a GEMM loop) sets how busy its
    GPUs are. What the command changes (an MTU set, a package installed) is stored and persists across commands.
    """
    return NodeSession(node, seed=seed, load=load).run(argv)


def run_nccl_tests(
    *,
    nodes: list[Node],
    collective: str = "all_reduce",
    min_bytes: int | str = 8,
    max_bytes: int | str = "8G",
    step_factor: int = 2,
    gpus_per_node: int = 8,
    seed: int = 0,
    env: dict[str, str] | None = None,
) -> CommandOutput:
    """nccl-tests launched with one process per GPU across `nodes` (as mpirun -np N*G would), as rank 0 prints it."""
    binary = f"{collective}_perf"
    if binary not in nccl.BINARIES:
        raise ValueError(f"unknown collective {collective!r}; choose one of {', '.join(nccl.COLLECTIVES)}")
    if not nodes:
        raise ValueError("run_nccl_tests needs at least one node")
    args = nccl.parse_args(
        ["-b", str(min_bytes), "-e", str(max_bytes), "-f", str(step_factor), "-g", str(gpus_per_node)]
    )
    states = [node_state(node=node) for node in nodes]
    return nccl.run_nccl_tests(states, binary, args, seed=seed, per_process_gpus=1 if len(nodes) > 1 else None, env=env)


# --- faults -----------------------------------------------------------------------------------------------------


def fault_errors(*, node: Node | None, kind: str | None, target: str | None = "", parameters=None) -> dict:
    """What inject_fault would refuse, by field, saving nothing: a target the node does not have or already has this
    fault on, and every bad parameter (under `parameters`, by its name). A part given as None was refused by the
    door: not judged."""
    return _checked(node, kind, target, parameters)[0] if kind is not None else {}


def _checked(node: Node | None, kind: str, target: str | None, parameters) -> tuple[dict, str, dict]:
    """(errors by field, the target with its default filled in, the parameters with theirs)."""
    errors: dict[str, list[str]] = {}
    try:
        parameters = fault_kind(kind).check_parameters(parameters or {})
    except FaultError as error:
        errors[error.field] = error.detail
    if node is not None and target is not None:
        try:
            target = check_target(build_state(_loaded(node)), kind, target)
        except FaultError as error:
            errors[error.field] = error.detail
        else:
            if SimFault.objects.filter(node=node, kind=kind, target=target).exists():
                errors["target"] = [_taken(node, kind, target)]
    return errors, target, parameters


def _taken(node: Node, kind: str, target: str) -> str:
    where = f" on {target}" if target else ""
    return f"{node.hostname} already has a {kind} fault{where}."


def inject_fault(*, node: Node, kind: str, target: str = "", parameters: dict | None = None, user=None) -> SimFault:
    """Give a simulated node a fault. Raises ValidationError naming every field (kind, target, parameters by name)
    at fault; nothing is stored then."""
    errors, target, parameters = _checked(node, kind, target or "", parameters)
    if errors:
        raise serializers.ValidationError(errors)
    try:
        with transaction.atomic():
            fault = SimFault.objects.create(node=node, kind=kind, target=target, parameters=parameters, created_by=user)
            _changes_fixing(node, kind, target).delete()
            append_sel(node=node, records=sel.fault_records(kind, target, fault.created.timestamp()))
            return fault
    except IntegrityError:  # injected by another request since the check
        raise serializers.ValidationError({"target": [_taken(node, kind, target)]}) from None


def _changes_fixing(node: Node, kind: str, target: str):
    """The command-made changes that would repair a new fault; it replaces them, so that it takes effect."""
    changes = SimChange.objects.on(node)
    fixed_by = fault_kind(kind).fixed_by
    if fixed_by is None:
        return changes.none()
    start, wildcard, end = fixed_by(target).partition("*")
    return changes.filter(key__startswith=start, key__endswith=end) if wildcard else changes.filter(key=start)


def backdate_fault(*, fault: SimFault, struck_at) -> None:
    """Let a fault have struck at `struck_at` when it is younger (a rehearsal plays it as if it struck a while ago:
    the training runs show what it did since). Never moves a fault later."""
    if fault.created > struck_at:
        SimFault.objects.filter(pk=fault.pk).update(created=struck_at)
        fault.created = struck_at


def clear_fault(*, fault: SimFault) -> None:
    """Remove one fault; the node's tools answer as before it."""
    fault.delete()


def clear_faults(*, node: Node, kind: str | None = None) -> int:
    """Remove a node's faults (of one kind, or all); returns how many were removed."""
    faults = SimFault.objects.on(node)
    if kind:
        faults = faults.filter(kind=kind)
    removed = 0
    for fault in faults:  # one by one, so each removal is audited
        fault.delete()
        removed += 1
    return removed


def clear_all(node: Node) -> int:
    return clear_faults(node=node)


# --- changes ----------------------------------------------------------------------------------------------------


def clear_changes(*, node: Node) -> int:
    """Forget what commands changed on a node; its tools answer from the inventory and faults again."""
    removed, _ = SimChange.objects.on(node).delete()
    return removed


def _last_boot(node: Node) -> dict | None:
    return SimChange.objects.on(node).filter(key=boot.BOOT_KEY).values_list("value", flat=True).first()


def reboot(*, node: Node, seed: int = 0, down_seconds: float = 0.0) -> int:
    """A simulated reboot: what lived only in the driver (power limits set with nvidia-smi -pl) is gone; files,
    packages and NIC settings written to disk stay; the node gets a new boot id and answers nothing for about
    `down_seconds` (0: back at once; `systemctl reboot` takes RACKPILOT_SIM_REBOOT_SECONDS: apps/simulator/boot.py).
    Returns how many settings were lost."""
    removed = 0
    with transaction.atomic():
        for prefix in VOLATILE_PREFIXES:
            count, _ = SimChange.objects.on(node).filter(key__startswith=prefix).delete()
            removed += count
        value = boot.next_boot(_last_boot(node), hostname=node.hostname, seed=seed, base_seconds=down_seconds)
        SimChange.objects.update_or_create(node=node, key=boot.BOOT_KEY, defaults={"value": value})
    return removed


# --- the BMC: chassis power and the System Event Log ---------------------------------------------------------


def power_is_on(node: Node) -> bool:
    value = SimChange.objects.on(node).filter(key=sel.POWER_KEY).values_list("value", flat=True).first()
    return bool((value or {}).get("on", True))


def switch_tray_leaking(tray) -> bool:
    """Whether an NVLink switch tray's leak detector reads a leak: a `leak` fault injected on a compute tray of its
    domain with the switch tray's slot as its target."""
    return SimFault.objects.filter(
        node__nvlink_domain_id=tray.domain_id, kind=FaultKind.LEAK, target=str(tray.slot)
    ).exists()


def sel_records(node: Node) -> list[sel.SelRecord]:
    """The node's SEL, oldest first: the 'log cleared' record at its creation, then what faults and power appended."""
    rows = SimChange.objects.on(node).filter(key__startswith=sel.SEL_PREFIX).order_by("key")
    stored = [
        sel.from_value(int(key.removeprefix(sel.SEL_PREFIX)), value) for key, value in rows.values_list("key", "value")
    ]
    return [sel.log_cleared(node.created.timestamp()), *stored]


def append_sel(*, node: Node, records: list[dict]) -> None:
    """Append records to the node's SEL, numbered after its last (record 1 is the log-cleared one)."""
    if not records:
        return
    with transaction.atomic():
        Node.objects.select_for_update().filter(pk=node.pk).first()  # one writer numbers the node's records
        last = SimChange.objects.on(node).filter(key__startswith=sel.SEL_PREFIX).order_by("-key").first()
        number = int(last.key.removeprefix(sel.SEL_PREFIX)) if last else 1
        for offset, value in enumerate(records, 1):
            SimChange.objects.create(node=node, key=sel.sel_key(number + offset), value=value)


def bmc_power(*, node: Node, action: str, seed: int = 0) -> None:
    """What the BMC's chassis control does: `off` turns the chassis off (the node answers nothing until it is on
    again); `on`, `cycle` and `reset` leave it on, freshly booted (a reboot: volatile settings lost, away for about
    RACKPILOT_SIM_REBOOT_SECONDS), a chassis that was off simply coming on; `status` changes nothing. Whatever takes
    the power away ends a hung OS (its node_hang fault is cleared); `on` to a chassis already on does not. The SEL
    records the Power Unit's off/down events."""
    if action == "status":
        return
    with transaction.atomic():
        was_on = power_is_on(node)
        now = clock.now()
        if action == "off":
            SimChange.objects.update_or_create(
                node=node, key=sel.POWER_KEY, defaults={"value": {"on": False, "at": now}}
            )
        elif action != "on" or not was_on:
            SimChange.objects.update_or_create(
                node=node, key=sel.POWER_KEY, defaults={"value": {"on": True, "at": now}}
            )
            reboot(node=node, seed=seed, down_seconds=settings.RACKPILOT_SIM_REBOOT_SECONDS)
        if action != "on":  # off, cycle, reset: the hung kernel loses its power (a chassis off was no longer hung)
            clear_faults(node=node, kind=FaultKind.NODE_HANG)
        append_sel(node=node, records=sel.power_records(action, was_on=was_on, at=now))


# --- telemetry --------------------------------------------------------------------------------------------------


def telemetry_model(*, workloads, seed: int = 0, hostnames: list[str] | None = None):
    """The telemetry model (apps.simulator.telemetry) of the simulated nodes (these hostnames, or all) with the
    workloads the feature layer names; a node's energy counter starts when its row was created (its boot), its faults
    when they were injected. Built afresh from the inventory each time: the recorder builds it once a run, a page only
    for the few nodes it asks about (apps.monitoring.recorder, apps.monitoring.telemetry)."""
    histories = _histories() if hostnames is None else _histories(hostname__in=hostnames)
    return ClusterTelemetry(histories, workloads, seed=seed, ledger=serving_ledger())


def telemetry_inputs_stamp() -> tuple:
    """What telemetry_model reads, in a few small queries: equal stamps, the same model, so a process that keeps one
    (the simulated exporters) rebuilds it only when this moves. The audit log's last entry stands for the inventory
    (each audited save, delete and bulk create writes one); the rest are written without an entry: the simulated
    changes, the faults a rehearsal backdates, the nodes' boot times the demo backdates."""
    return (
        AuditEntry.objects.aggregate(last=Max("id"))["last"],
        tuple(SimFault.objects.order_by("id").values_list("id", "created")),
        tuple(SimChange.objects.aggregate(count=Count("id"), last=Max("updated")).values()),
        tuple(Node.objects.aggregate(count=Count("id"), last=Max("created")).values()),
    )


def _histories(**filters) -> list[NodeHistory]:
    nics = Nic.objects.select_related("cable_as_a", "cable_as_b")
    nodes = Node.objects.prefetch_related(
        "gpus__sku", Prefetch("nics", queryset=nics), "firmware", "volumes__tier", "sim_faults", "sim_changes"
    )
    nodes = list(nodes.filter(gpus__isnull=False, **filters).distinct())
    leaves = set().union(*(data_leaves(node) for node in nodes))
    ratios, pods = leaf_uplink_ratios(leaves), leaf_pods(leaves)
    return [
        NodeHistory(
            healthy=build_state(node, ratios, pods),
            booted=node.created.timestamp(),
            faults=[
                TimedFault(fault.kind, fault.target, fault.parameters, fault.created.timestamp())
                for fault in node.sim_faults.all()
            ],
            changes=[
                TimedChange(change.key, change.value, change.updated.timestamp())
                for change in node.sim_changes.all()
                # the changes that move the GPUs' figures: power limits, and the chassis power its BMC set
                if change.key.startswith(VOLATILE_PREFIXES) or change.key == sel.POWER_KEY
            ],
        )
        for node in nodes
    ]


LEDGER_DAYS = 8  # what the telemetry windows (7 d at most) can ask for, and a day's margin


def serving_ledger() -> ServingLedger:
    """What the simulated endpoints served, as stored by the process that serves them."""
    since = int(time.time()) - LEDGER_DAYS * 86400
    rows = SimServingLoad.objects.filter(second__gte=since).values_list("service", "second", "values")
    return ServingLedger.from_rows(rows.iterator())


def store_serving_load(rows: list[tuple[str, int, list[float]]]) -> None:
    """Store the ledger's changed rows (their whole values) and forget rows past the ledger's days."""
    with transaction.atomic():
        for service, second, values in rows:
            SimServingLoad.objects.update_or_create(service=service, second=second, defaults={"values": values})
        SimServingLoad.objects.filter(second__lt=int(time.time()) - LEDGER_DAYS * 86400).delete()
