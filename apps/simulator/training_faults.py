"""The faults of a simulated training run, read from the simulator's records, and the files the run shows.

A fault starts when it was injected (SimFault.created). It ends when a command repaired it: the node's state no
longer shows it (MTU back at the inventory's, PFC back on the priority) and the change that did it was stored at
SimChange.updated. A fault only clearing removes (XID 79, link down, disk full) ends when it is cleared, and then it
is gone from the record: the log reads as if it never happened.

The files are read at the simulated cluster's clock (apps/simulator/clock.py), the one that stamps those records.
"""

from dataclasses import replace
from datetime import UTC, datetime

from apps.inventory.models import Node
from apps.simulator import clock
from apps.simulator.changes import apply_changes
from apps.simulator.choices import FaultEffect, FaultKind, kinds_with
from apps.simulator.faults.node import apply_faults
from apps.simulator.models import SimChange, SimFault
from apps.simulator.state import SimulatedNode, build_state
from apps.simulator.training import (
    FATAL_FAULTS,
    CheckpointFile,
    Disruption,
    Resume,
    TrainingRun,
    all_hosts,
    checkpoint_files,
    render_log,
    runs_on,
)

TRAINING_FAULTS = (*FATAL_FAULTS, *kinds_with(FaultEffect.CHECKPOINTS))
# The faults that slow a running job without failing it: they show only in its GPUs' utilisation series
# (tools/utilisation.py), never in its log.
SLOWING_FAULTS = kinds_with(FaultEffect.SLOWS)
JOB_FAULTS = kinds_with(*FaultEffect)  # every fault a runbook can be rehearsed against: it fails or slows a job
REMOVED = "removed:"  # SimChange key prefix: a path `rm -rf` removed (value: the bytes it freed)
RESUME = "training:resume:"  # SimChange key prefix: <rendezvous id>:<node rank>, one per node of a relaunch


def with_resumes(run: TrainingRun) -> TrainingRun:
    """The run with the relaunches recorded on the simulated nodes (the recovery's torchrun on every node, or a
    scheduler's controller placing every node rank at once: sbatch, kubectl apply): a relaunch counts once every
    node rank of it has started, at the time the last one did."""
    groups: dict[str, dict[int, tuple[str, float, dict]]] = {}
    for change in SimChange.objects.filter(key__startswith=RESUME).select_related("node"):
        value = change.value if isinstance(change.value, dict) else {}
        if value.get("load", "").rstrip("/") != run.checkpoint_dir.rstrip("/"):
            continue
        rendezvous, _, rank = change.key[len(RESUME) :].rpartition(":")
        host = value.get("host") or change.node.hostname  # a scheduler's controller records the node it placed
        groups.setdefault(rendezvous, {})[int(rank)] = (host, change.updated.timestamp(), value)
    resumes = []
    for ranks in groups.values():
        nnodes = next(iter(ranks.values()))[2].get("nnodes", 0)
        if sorted(ranks) != list(range(nnodes)):
            continue
        hosts = tuple(ranks[rank][0] for rank in range(nnodes))
        at = max(entry[1] for entry in ranks.values())
        resumes.append(Resume(at=at, step=int(ranks[0][2].get("step", 0)), hosts=hosts))
    return replace(run, resumes=tuple(sorted(resumes, key=lambda resume: resume.at)))


def _state(node: Node) -> SimulatedNode:
    """The node's state now (as services.node_state builds it; the tools import this module, so not from there)."""
    node = Node.objects.prefetch_related(
        "gpus__sku", "nics__cable_as_a", "nics__cable_as_b", "firmware", "volumes__tier", "sim_faults", "sim_changes"
    ).get(pk=node.pk)
    return apply_changes(apply_faults(build_state(node), node.sim_faults.all()), node.sim_changes.all())


def disruptions(run: TrainingRun) -> list[Disruption]:
    hosts = all_hosts(run)
    faults = SimFault.objects.filter(node__hostname__in=hosts, kind__in=TRAINING_FAULTS).select_related("node")
    removals = list(SimChange.objects.filter(node__hostname__in=hosts, key__startswith=REMOVED).select_related("node"))
    found = [
        Disruption(
            host=change.node.hostname,
            kind="removed",
            start=change.updated.timestamp(),
            target=change.key[len(REMOVED) :],
        )
        for change in removals
    ]
    states: dict[str, SimulatedNode] = {}
    for fault in faults:
        host = fault.node.hostname
        if fault.kind == FaultKind.DATALOADER_STALL:
            if loader_hangs(fault, run.timeout_ms):
                start = fault.created.timestamp()
                found.append(Disruption(host=host, kind=fault.kind, start=start, end=start + _hang_s(fault)))
            continue
        if host not in states and fault.kind in (FaultKind.MTU, FaultKind.PFC_OFF, FaultKind.NIC_DOWN, FaultKind.XID79):
            states[host] = _state(fault.node)  # only these need the node's state (a repair, the links)
        state = states.get(host)
        found.append(
            Disruption(
                host=host,
                kind=fault.kind,
                start=fault.created.timestamp(),
                end=_freed_at(fault, removals)
                if fault.kind == FaultKind.DISK_FULL
                else (_repaired_at(fault, state) if state is not None else None),
                target=fault.target,
                links=_links(run, state, fault) if state is not None else (),
            )
        )
    return found


def loader_hangs(fault: SimFault, timeout_ms: int = TrainingRun.timeout_ms) -> bool:
    """Whether a data loader stall holds its node's ranks past the NCCL watchdog once (its `hang_s`): the peers
    time out, as for a network fault; shorter stalls only show in the utilisation series."""
    return fault.kind == FaultKind.DATALOADER_STALL and _hang_s(fault) * 1000 > timeout_ms


def _hang_s(fault: SimFault) -> float:
    return float((fault.parameters or {}).get("hang_s", 0))


def _freed_at(fault: SimFault, removals: list[SimChange]) -> float | None:
    """When space was first freed on the full volume after it filled (a removal under its mount point)."""
    mount = fault.target.rstrip("/") + "/"
    times = [
        change.updated.timestamp()
        for change in removals
        if change.node_id == fault.node_id
        and change.key[len(REMOVED) :].startswith(mount)
        and change.updated >= fault.created
        and int(change.value or 0) > 0
    ]
    return min(times, default=None)


REPAIRABLE = (FaultKind.MTU, FaultKind.PFC_OFF)  # the faults a command can undo (what _repaired_at reads)


def repaired_at(fault: SimFault) -> datetime | None:
    """When a command run on its node repaired the fault (an MTU set back, PFC enabled again), if one did: the fault
    is still injected, but the node no longer shows it. Only the kinds a command can undo are read."""
    if fault.kind not in REPAIRABLE:
        return None
    at = _repaired_at(fault, _state(fault.node))
    return datetime.fromtimestamp(at, tz=UTC) if at is not None else None


def _repaired_at(fault: SimFault, state: SimulatedNode) -> float | None:
    """When a command repaired the fault, if one did (the state no longer shows it)."""
    if fault.kind == FaultKind.MTU:
        nic, expected = state.nic(fault.target), fault.node.nics.filter(name=fault.target).first()
        if nic is None or expected is None or nic.mtu != expected.mtu:
            return None
        key = f"nic:{fault.target}:mtu"
    elif fault.kind == FaultKind.PFC_OFF:
        if not all(int(fault.target) in nic.pfc_priorities for nic in state.rdma_nics):
            return None
        key = "nic:%:pfc"
    else:
        return None
    changes = SimChange.objects.filter(node=fault.node)
    changes = changes.filter(key__startswith="nic:", key__endswith=":pfc") if "%" in key else changes.filter(key=key)
    last = max((change.updated for change in changes if change.updated >= fault.created), default=None)
    return last.timestamp() if last else None


def _address(run: TrainingRun, state: SimulatedNode, nic_name: str) -> str:
    index = [nic.name for nic in state.data_nics].index(nic_name) if state.nic(nic_name) else 0
    return f"10.{index}.{run.hosts.index(state.hostname) % 250}.{11 + index}"


def _links(run: TrainingRun, state: SimulatedNode, fault: SimFault) -> tuple[tuple[int, str, str], ...]:
    """The local ranks a fault touches, with the NIC each reaches the fabric through (same PCIe switch)."""
    gpus = sorted(state.gpus, key=lambda gpu: gpu.index)[: run.ranks_per_node]
    if fault.kind == FaultKind.XID79:
        return tuple((local, "", "") for local, gpu in enumerate(gpus) if str(gpu.index) == fault.target)
    if fault.kind == FaultKind.DISK_FULL:
        return ()
    nics = (
        state.data_nics
        if fault.kind == FaultKind.PFC_OFF
        else [nic for nic in state.data_nics if nic.name == fault.target]
    )
    links = []
    for local, gpu in enumerate(gpus):
        for nic in nics:
            if nic.pcie_switch and nic.pcie_switch == gpu.pcie_switch:
                links.append((local, nic.rdma_device or "", _address(run, state, nic.name)))
                break
    return tuple(links)


def _runs(hostname: str) -> list[TrainingRun]:
    return [with_resumes(run) for run in runs_on(hostname)]


def _run_at(hostname: str, path: str) -> TrainingRun | None:
    return next((run for run in _runs(hostname) if run.log_path == path), None)


def training_file(hostname: str, path: str, now: float | None = None, last: int | None = None) -> str | None:
    """The content of a training run's log on this host (None: no run logs to that path here); `last`: its last
    lines only."""
    run = _run_at(hostname, path)
    if run is None:
        return None
    return render_log(run, hostname, disruptions(run), clock.now() if now is None else now, last=last)


def _run_keeping(hostname: str, path: str) -> TrainingRun | None:
    """The run whose checkpoint directory is `path` or holds it."""
    path = path.rstrip("/")
    for run in _runs(hostname):
        directory = run.checkpoint_dir.rstrip("/")
        if path == directory or path.startswith(directory + "/"):
            return run
    return None


def checkpoint_tree(hostname: str, path: str, now: float | None = None) -> dict[str, list[CheckpointFile]] | None:
    """The checkpoint directories (and their files) of the run keeping checkpoints at or above `path` on this host
    (None: no run does)."""
    run = _run_keeping(hostname, path)
    if run is None:
        return None
    return checkpoint_files(run, disruptions(run), clock.now() if now is None else now)


def checkpoint_listing(hostname: str, directory: str, now: float | None = None) -> list[str] | None:
    """The checkpoint directories in a run's checkpoint directory (None: no run keeps checkpoints there)."""
    run = _run_keeping(hostname, directory)
    if run is None or run.checkpoint_dir.rstrip("/") != directory.rstrip("/"):
        return None
    return list(checkpoint_files(run, disruptions(run), clock.now() if now is None else now))
