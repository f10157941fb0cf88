"""The fault lifecycle, measured (issue 25): a seeded campaign of simulator faults on the demo cluster at a size, on a
simulated clock, through the producers, the remediation evaluator and the checkpoint-aware quarantine, as the
periodic tasks run them, then the repairs of the nodes taken out until they are back in service. Every figure is
counted from what the code did; one it cannot measure says why.

    .venv/bin/python bench/lifecycle.py                    # 512 nodes, seed 25
    .venv/bin/python bench/lifecycle.py --nodes 64 --seed 7

Runs on a throwaway SQLite database under var/bench/lifecycle/ with the demo cluster at --nodes compute nodes and
these policies on: XID 79, uncorrectable ECC and a failed row remap → quarantine; a NIC link down → quarantine (so a
leaf switch going down meets the circuit breaker: BREAKER below); a node not answering → power cycle through its BMC;
NVLink (XID 74), thermal and power-brake slowdowns, a downtrained PCIe link, a pending row remap, XID 48 and a
degraded link → notify.

The clock: one simulated clock for the whole run (django.utils.timezone.now, and the simulator's own reads of the
time: its kernel log, its boots and BMC power), so every row the code stamps (a fault, an event, a decision, a
repair's steps, a gate) is stamped on it. The cluster is loaded a day before the campaign.

The campaign: --faults simulator faults (`inject_fault` at the simulated moment each strikes) of the twelve kinds of
the mix below, round robin, on a GPU (a NIC, a mount, the node) of a random node, a minute apart, and halfway one
leaf switch down: a `nic_down` on the NIC of every node cabled to the back-test campaign's leaf
(apps/remediation/campaign.py, leaf_nodes()). A 4-node training job (a save every 200 steps of 6 s) runs on the nodes
of the first four quarantine faults. The clock steps 30 s; each step runs the telemetry watch at `now` over the whole
fleet (GPU fields and NICs, the model's noise included), every 300 s the kernel-log read and the BMC event-log (SEL)
read over the fleet (their jobs run here, over the sim transport), then `evaluate(now=…)` and
`settle_deferred(now=…)`, and the jobs those start (the drains, the power cycles, the evidence captures).

Detection latency is per producer: from the fault to the simulated moment the producer's run first recorded an event
on the node (its first_seen may be earlier: the kernel log and the SEL stamp the line's own time).

What is not driven: no periodic producer sees a NIC link down (the kernel log's "Link down" line is below its level),
so the leaf's `link_down` events are recorded as the back-test's campaign records them, at the first step after the
switch goes down (its latency is not a detection). The training job's progress is modelled here (a step every 6 s, a
save every 200 steps, written as the `training-progress` read writes it), not read from the simulated job's log.
Faults no producer sees (a wrong MTU, a power cap, a straggler, a full disk) are injected and counted as not
detected. The 100 healthy runs: 100 nodes with no fault (and not behind the leaf) watched through the whole campaign;
any event or decision on them is a false alarm.

The repairs (apps/remediation/repairs.py), on the same clock: each repair a quarantine opened has its evidence
captured by the job the quarantine started; a technician (modelled: REPAIR below) starts work TECH_RESPONSE_S after the
evidence is in, replaces the GPU the events name (`record_part`, the simulator's fault cleared) or, for every other
XID 79, first reseats it (no part: the fault stays, the GPU gate fails and the repair goes back to work); the nodes
behind the leaf wait for the switch, replaced SWITCH_FIX_S after it went down (the operator then clears the link
events of the nodes the breaker left in service). Then `start_validation`: the gate the fault chose runs its benchmark
runs on the simulator, their results coming GATE_SUITE_S after the start; a passed gate returns the node through the
scheduler (its `scheduler-action` job run here). After the campaign the clock jumps from one repair step to the next
(five-minute grid), the watch, the evaluator and the settling run at each; the kernel-log and SEL reads stop with the
campaign (nothing new strikes). MTTR: from the node's drain to the repair's return.
"""

import argparse
import datetime as dt
import json
import os
import random
import sys
import time
from collections import Counter, defaultdict
from types import SimpleNamespace

from child import ROOT, run_on_fresh_sqlite, run_shards_here, setup_django

from apps.core.text import counted

STEP_S = 30  # the telemetry watch's period (RACKPILOT_PERIODIC_TASKS), and the evaluator's clock step
READ_EVERY_S = 300  # the kernel-log and SEL reads' period (read_kernel_logs, RACKPILOT_BMC_SEL_SECONDS)
SEL_PHASE_S = 150  # the SEL read runs half a period after the kernel-log read (beat starts them independently)
FAULT_GAP_S = 60
# The breaker: 4 nodes (or 5 % of the fleet) in 5 minutes. The campaign is a fleet's weeks compressed into about
# two simulated hours (the watch over 512 nodes every 30 s is what the bench's time goes on), so its window is
# short: four takers in every twelve faults (three quarantines and a power cycle, that one up to 5 minutes late: the
# kernel-log read finds it) put at most three in any 5 minutes; the faults pause for two windows around the leaf.
BREAKER = {"breaker_max_nodes": 4, "breaker_max_percent": 5, "breaker_window_minutes": 5}
LEAF_PAUSE_S = 2 * 5 * 60 + FAULT_GAP_S
AFTER_S = 30 * 60  # the clock runs on after the last fault: the deferred drains' deadlines (critical: 15 min)
SECONDS_PER_STEP, CHECKPOINT_EVERY = 6.0, 200
# The repair model: what people and the gate's runs take, in simulated seconds.
TECH_RESPONSE_S = 3600  # a technician takes a repair up an hour after its evidence is in (or its gate failed)
GPU_SWAP_S = 2 * 3600  # an HGX tray out, the GPU swapped from stock, the tray back
RESEAT_S = 30 * 60  # a GPU reseated (tried first for every other XID 79: it does not fix the simulator's fault)
SWITCH_FIX_S = 3 * 3600  # the leaf switch replaced after it went down (a person decides after the breaker trip)
GATE_SUITE_S = {"burn-in": 30 * 60, "nvbandwidth": 10 * 60, "nccl-pairwise": 15 * 60}  # dcgmi diag -r 3 is long
REPAIR_GRID_S = 300
REPAIR_HORIZON_S = 24 * 3600  # a repair not back a day after the campaign is reported as not returned
# The campaign's faults -> (the simulator fault's parameters, the event kinds a producer should record, the first the
# one the policy is judged on, and the action the policy for them takes). No kinds: no periodic producer sees it.
MIX = {  # in this order, round robin: the takers three or four faults apart
    "xid79": ({}, ("xid79",), "quarantine"),
    "thermal": ({"temperature": 95}, ("gpu_thermal_slowdown",), "notify"),
    "power_cap": ({"watts": 300}, (), None),
    "mtu": ({"mtu": 1500}, (), None),
    "ecc": ({"count": 2}, ("ecc_uncorrectable",), "quarantine"),
    "nvlink_down": ({"link": 3}, ("xid74",), "notify"),
    # A lane down and a dirty connector: the NIC watch reads the rate (and the CRC errors past the tiers).
    "degraded_cable": ({"rate_gbps": 200, "crc_per_million": 50}, ("link_degraded", "link_errors"), "notify"),
    "straggler": ({"sm_clock_mhz": 1200}, (), None),
    # More rows than a bank spares: a failed remap, and the uncorrectable errors too (whichever is quarantined
    # first, the other's decision is refused: one drain per node).
    "ecc_exhausted": ({"count": 9}, ("row_remap_failure", "ecc_uncorrectable"), "quarantine"),
    "pcie_downtrained": ({"gen": 4, "width": 8}, ("pcie_downtrained",), "notify"),
    "disk_full": ({}, (), None),
    # The OS hung: only the kernel-log read sees it (its ssh connection times out); the BMC's watchdog logs it too.
    "node_hang": ({}, ("node_unreachable",), "power_cycle"),
}
POLICIES = (
    ("xid79", "critical", "quarantine"),
    ("ecc_uncorrectable", "major", "quarantine"),
    ("row_remap_failure", "critical", "quarantine"),
    ("link_down", "critical", "quarantine"),
    ("node_unreachable", "critical", "power_cycle"),
    ("xid74", "major", "notify"),
    ("gpu_thermal_slowdown", "minor", "notify"),
    ("gpu_power_brake_slowdown", "major", "notify"),
    ("pcie_downtrained", "minor", "notify"),
    ("row_remap_pending", "major", "notify"),
    ("xid48", "major", "notify"),
    ("link_degraded", "minor", "notify"),
)
PRODUCERS = {"telemetry", "kernel_log", "bmc_log"}  # the periodic ones (a gate's failed burn-in is no detection)
RUN_HERE = ("scheduler-action", "bmc-power", "repair-evidence")  # the jobs the loop's decisions start, run as started


def _percentile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered) + 0.5) - 1))]


class SimClock:
    """The simulated time every reader of the time sees in the child: `s` seconds after `t0`."""

    def __init__(self, t0: int):
        self.t0, self.s = t0, 0.0

    def unix(self) -> float:
        return self.t0 + self.s

    def now(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.unix(), tz=dt.UTC)

    def install(self) -> None:
        from django.utils import timezone

        from apps.simulator import boot
        from apps.simulator import services as simulator
        from apps.simulator.tools import kernel_log as dmesg

        timezone.now = self.now  # model fields' auto_now and every service's timezone.now()
        dmesg._now = self.unix
        boot.time = SimpleNamespace(time=self.unix)
        simulator.time = SimpleNamespace(time=self.unix, monotonic=time.monotonic)


def measure(nodes: int, seed: int, faults: int) -> dict:
    setup_django()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from apps.benchmarks import services as benchmarks
    from apps.benchmarks.choices import RunStatus
    from apps.health import services as health
    from apps.health.choices import ClearedBy, Severity, Source
    from apps.health.models import HealthEvent
    from apps.inventory.demo import ClusterShape, load_cluster
    from apps.inventory.models import Node
    from apps.jobs import services as job_services
    from apps.jobs.choices import JobStatus
    from apps.jobs.models import Job
    from apps.monitoring import kernel_log, watch
    from apps.monitoring.bmc import logins, polling
    from apps.remediation import campaign, repairs
    from apps.remediation import services as remediation
    from apps.remediation.choices import REPAIR_ACTIVE, GateState, PartType, RepairState
    from apps.remediation.models import RemediationDecision, RemediationPolicy, Repair
    from apps.simulator import services as sim
    from apps.simulator.models import SimFault
    from apps.workloads.choices import TrainingState
    from apps.workloads.models import TrainingJob, TrainingJobNode, TrainingProgress

    started, cpu_started, load_before = time.perf_counter(), time.process_time(), os.getloadavg()
    t0 = (int(time.time()) // 86_400 - 1) * 86_400  # yesterday's midnight: the whole campaign is in the past
    clock = SimClock(t0)
    clock.install()
    clock.s = -86_400  # the cluster up a day before the campaign: its nodes' boots, its rows
    call_command("migrate", verbosity=0)
    load_cluster(ClusterShape(compute_nodes=nodes))
    job_services.enqueue = lambda job: None  # jobs are created, and run below where the loop runs them
    benchmarks.enqueue = lambda run: None  # the gate's runs are executed when their modelled time has passed
    for node in Node.objects.filter(role="compute"):  # the BMC logins the SEL read and the power cycle use
        logins.save_bmc(
            node=node, address=node.bmc_address, protocol="ipmi", port=None, user=settings.RACKPILOT_SIM_BMC_USER,
            verify_tls=True, password=settings.RACKPILOT_SIM_BMC_PASSWORD,
        )  # fmt: skip
    technician = get_user_model().objects.create_user(username="technician")
    loaded_s = time.perf_counter() - started
    clock.s = 0

    def at(seconds: float) -> dt.datetime:
        return dt.datetime.fromtimestamp(t0 + seconds, tz=dt.UTC)

    RemediationPolicy.objects.all().delete()
    for pattern, severity, action in POLICIES:
        RemediationPolicy.objects.create(
            name=pattern, kind_pattern=pattern, min_severity=severity, action=action, mode="on", **BREAKER
        )  # fmt: skip

    rng = random.Random(seed)
    compute = list(Node.objects.filter(role="compute").order_by("hostname"))
    leaf, leaf_nics = campaign.leaf_nodes()
    leaf_hosts = {nic.node.hostname for nic in leaf_nics}
    candidates = [node for node in compute if node.hostname not in leaf_hosts]
    rng.shuffle(candidates)
    kinds = list(MIX)
    plan = []  # (when, node, simulator kind, mix key, target, parameters)
    for number in range(faults):
        key = kinds[number % len(kinds)]  # every kind at least faults // len(kinds) times
        node = candidates[number % len(candidates)]
        parameters, _, _ = MIX[key]
        kind = "ecc" if key == "ecc_exhausted" else key
        if kind in ("degraded_cable", "mtu"):
            target = rng.choice(list(node.nics.filter(purpose="data").order_by("name"))).name
        elif kind == "disk_full":
            target = "/checkpoints"
        elif kind in ("straggler", "node_hang"):
            target = ""
        else:
            target = str(rng.choice(list(node.gpus.values_list("index", flat=True))))
        # Halfway, the leaf goes down; the faults pause for the breaker's window after it (a quarantine refused
        # there would be the breaker doing its job, not a trip elsewhere).
        pause = LEAF_PAUSE_S if number >= faults // 2 else 0
        when = STEP_S + number * FAULT_GAP_S + pause + rng.randint(0, STEP_S - 1)
        plan.append((when, node, kind, key, target, parameters))
    faulted = {node.hostname for _, node, *_ in plan}
    healthy = [node for node in candidates if node.hostname not in faulted][:100]
    leaf_at = plan[faults // 2 - 1][0] + LEAF_PAUSE_S // 2

    # The training job: on the nodes of the first four quarantine faults (so each is deferred to its checkpoint).
    quarantined = [node for _, node, _, key, *_ in plan if MIX[key][2] == "quarantine"]
    job = TrainingJob.objects.create(
        name="llm-pretrain", ranks_per_node=8, checkpoint_dir="/checkpoints/llm-pretrain",
        checkpoint_interval_steps=CHECKPOINT_EVERY, state=TrainingState.RUNNING, started_at=at(-3600),
    )  # fmt: skip
    for rank, node in enumerate(quarantined[:4]):
        TrainingJobNode.objects.create(job=job, node=node, node_rank=rank)
    job_step = {"step": int(3600 / SECONDS_PER_STEP) + 37}  # an hour in, between two saves

    def progress(now_s: float) -> None:
        """The job's log as the training-progress read writes it: the step it reached, its newest save."""
        job.refresh_from_db()
        if job.state != TrainingState.RUNNING:
            return
        previous = job_step["step"]
        job_step["step"] = previous + int(STEP_S / SECONDS_PER_STEP)
        # A step run again after the resume replaces its first run's point, as the progress read keeps it.
        TrainingProgress.objects.update_or_create(
            job=job, step=job_step["step"], defaults={"time": at(now_s), "seconds_per_step": SECONDS_PER_STEP}
        )
        saved = job_step["step"] // CHECKPOINT_EVERY * CHECKPOINT_EVERY
        if saved > (job.last_checkpoint_step or 0):
            job.last_checkpoint_step, job.last_checkpoint_path = saved, f"/checkpoints/llm-pretrain/iter_{saved:07d}"
            job.save(update_fields=["last_checkpoint_step", "last_checkpoint_path"])

    def resumed(decision) -> None:
        """The resume around a drained node: the job goes back to its checkpoint, without that node."""
        TrainingJobNode.objects.filter(job=job, node=decision.node).delete()
        if decision.checkpoint_step is not None:
            job_step["step"] = decision.checkpoint_step

    # When each producer's run first recorded each event: (event id, source) -> simulated second.
    observed: dict[tuple[int, str], float] = {}

    def note_observations(now_s: float) -> None:
        for pk, sources in HealthEvent.objects.values_list("pk", "sources"):
            for source in sources or []:
                observed.setdefault((pk, source), now_s)

    costs: dict[str, list[tuple[float, float]]] = defaultdict(list)  # producer -> (wall, CPU) per run

    def timed(name: str, call, **kwargs):
        wall, cpu = time.perf_counter(), time.process_time()
        result = call(**kwargs)
        costs[name].append((time.perf_counter() - wall, time.process_time() - cpu))
        return result

    def run_started_jobs() -> None:
        for started_job in Job.objects.filter(kind__in=RUN_HERE, status=JobStatus.QUEUED).order_by("created", "pk"):
            run_shards_here(started_job)

    # --- the repairs' model: repair id -> its next step and when it is due
    plans: dict[int, dict] = {}
    leaf_fixed = {"at": None}

    def gpu_faults(repair) -> tuple[list, list]:
        """The GPUs the repair's events name, and the simulator's faults on them."""
        gpus = sorted({e.gpu for e in repair.events.select_related("gpu") if e.gpu_id}, key=lambda g: g.index)
        faults_on = [f for f in SimFault.objects.filter(node=repair.node) if f.target in {str(g.index) for g in gpus}]
        return gpus, faults_on

    xid79_repairs = []

    def drive_repairs(now_s: float) -> None:
        clock.s = now_s
        if leaf_fixed["at"] is None and leaf_recorded is not None and now_s >= leaf_recorded + SWITCH_FIX_S:
            for fault in SimFault.objects.filter(kind="nic_down", node__hostname__in=leaf_hosts):
                sim.clear_fault(fault=fault)  # the switch replaced: every link behind it back up
            left_in_service = HealthEvent.objects.filter(kind="link_down", node__drained_at__isnull=True).open()
            for event in left_in_service:  # the person who replaced it closes what the breaker left
                health.clear_event(
                    event=event, by=ClearedBy.OPERATOR, user=technician,
                    reason=f"Leaf switch {leaf.name} replaced; its links are up again.",
                )  # fmt: skip
            leaf_fixed["at"] = now_s
        for repair in Repair.objects.filter(state__in=REPAIR_ACTIVE).select_related("node").order_by("pk"):
            step = plans.setdefault(repair.pk, {"next": "evidence", "due": now_s, "tries": 0, "gates": 0})
            if step["next"] == "evidence":
                if repair.evidence_captured_at is None:
                    continue  # its capture job runs with the other started jobs
                kinds = set(repair.events.values_list("kind", flat=True))
                step["leaf"] = "link_down" in kinds
                step["reseat"] = "xid79" in kinds and len(xid79_repairs) % 2 == 0
                if "xid79" in kinds:
                    xid79_repairs.append(repair.pk)
                step.update(next="work", due=repair.evidence_captured_at.timestamp() - t0 + TECH_RESPONSE_S)
            if step["due"] > now_s:
                continue
            if step["next"] == "work":
                if step["leaf"] and leaf_fixed["at"] is None:
                    continue  # nothing to do on the node until the switch is back
                if repair.state == RepairState.EVIDENCE_CAPTURED:
                    repairs.start_work(repair=repair, user=technician, note="Taken up.")
                gpus, faults_on = gpu_faults(repair)
                if gpus and step.pop("reseat", False):
                    step.update(next="gate", due=now_s + RESEAT_S, part="reseated")
                elif gpus:
                    step.update(next="part", due=now_s + GPU_SWAP_S)
                else:
                    step.update(next="gate", due=now_s, part="none")
            elif step["next"] == "part":
                gpus, faults_on = gpu_faults(repair)
                for gpu in gpus:
                    repairs.record_part(
                        repair=repair, component_type=PartType.GPU, gpu=gpu, user=technician,
                        new_serial=f"RMA{repair.pk:04d}G{gpu.index}T{step['tries']}",
                    )  # fmt: skip
                for fault in faults_on:
                    sim.clear_fault(fault=fault)
                step.update(next="gate", due=now_s, part="gpu")
            elif step["next"] == "gate":
                try:
                    gate = repairs.start_validation(repair=repair, user=technician, transport="sim")
                except repairs.RepairRefused as refused:
                    step.update(next="stuck", due=float("inf"), why=remediation.said(refused))
                    continue
                step["tries"] += 1
                suites = gate.runs.values_list("suite", flat=True)
                step.update(next="results", due=now_s + sum(GATE_SUITE_S[s] for s in suites), gate=gate.pk)
            elif step["next"] == "results":
                gate = repair.gates.get(pk=step["gate"])
                for run in gate.runs.order_by("created", "pk"):
                    if run.status == RunStatus.QUEUED:
                        benchmarks.execute_run(run=run)  # its end settles the gate (run_finished)
                gate.refresh_from_db()
                if gate.state == GateState.FAILED:  # back to repair: the technician comes back to it
                    step.update(next="part", due=now_s + TECH_RESPONSE_S + GPU_SWAP_S)
                else:
                    step.update(next="returned", due=float("inf"))
        run_started_jobs()  # the resume's scheduler job, started by the return

    def next_repair_due() -> float | None:
        active = Repair.objects.filter(state__in=REPAIR_ACTIVE).values_list("pk", flat=True)
        dues = [plans[pk]["due"] for pk in active if pk in plans and plans[pk]["due"] != float("inf")]
        if leaf_fixed["at"] is None and leaf_recorded is not None:
            dues.append(leaf_recorded + SWITCH_FIX_S)
        return min(dues) if dues else None

    injected = []  # (at_s, SimFault or None, mix key, node)
    pending = sorted(plan, key=lambda row: row[0])
    steps, campaign_steps = 0, 0
    end_s = max(pending[-1][0], leaf_at) + AFTER_S
    leaf_recorded = None
    now_s = 0
    while True:
        clock.s = now_s
        in_campaign = now_s <= end_s
        while pending and pending[0][0] <= now_s:
            when, node, kind, key, target, parameters = pending.pop(0)
            clock.s = when  # the fault, its SEL record, struck when it strikes
            fault = sim.inject_fault(node=node, kind=kind, target=target, parameters=parameters)
            injected.append((when, fault, key, node))
            clock.s = now_s
        if leaf_recorded is None and now_s >= leaf_at and leaf is not None:
            clock.s = leaf_at
            for nic in leaf_nics:
                sim.inject_fault(node=nic.node, kind="nic_down", target=nic.name)
            clock.s = now_s
            # No periodic producer sees a NIC down: recorded as the back-test's campaign records a leaf down.
            for second, nic in enumerate(leaf_nics):
                health.record_event(
                    component=nic, source=Source.TELEMETRY, kind="link_down", severity=Severity.CRITICAL,
                    summary=f"{nic.name}: link down (leaf {leaf.name})", at=at(now_s + min(second, STEP_S - 1)),
                )  # fmt: skip
            leaf_recorded = now_s
        progress(now_s)
        timed("watch", watch.watch_telemetry, now=t0 + now_s)
        note_observations(now_s)
        if in_campaign and now_s % READ_EVERY_S == 0:
            timed("kernel_log", lambda: (read := kernel_log.schedule_read()) and run_shards_here(read))
            note_observations(now_s)
        if in_campaign and now_s % READ_EVERY_S == SEL_PHASE_S:
            timed("bmc_sel", lambda: (read := polling.schedule_sel_reads()) and run_shards_here(read))
            note_observations(now_s)
        wall, cpu = time.perf_counter(), time.process_time()
        remediation.evaluate(now=at(now_s), transport="sim")
        for decision in remediation.settle_deferred(now=at(now_s), transport="sim"):
            resumed(decision)
        run_started_jobs()
        costs["evaluate+settle"].append((time.perf_counter() - wall, time.process_time() - cpu))
        wall, cpu = time.perf_counter(), time.process_time()
        drive_repairs(now_s)
        costs["repairs"].append((time.perf_counter() - wall, time.process_time() - cpu))
        steps += 1
        campaign_steps += in_campaign
        if now_s < end_s:
            now_s += STEP_S
            continue
        due = next_repair_due()
        if due is None or due > end_s + REPAIR_HORIZON_S:
            break
        now_s = max(now_s + REPAIR_GRID_S, -(-due // REPAIR_GRID_S) * REPAIR_GRID_S)
    finished_s = now_s

    # --- the figures, from the events and decisions recorded
    latency: dict[str, list[float]] = defaultdict(list)
    latency_by_kind: dict[tuple[str, str], list[float]] = defaultdict(list)
    right, wrong, unseen, by_kind = 0, [], Counter(), Counter()
    decisions = RemediationDecision.objects.select_related("event", "policy", "node")
    for when, _fault, key, node in injected:
        _, event_kinds, action = MIX[key]
        by_kind[key] += 1
        on_node = list(HealthEvent.objects.filter(node=node))
        firsts: dict[str, float] = {}
        for event in on_node:
            for source in set(event.sources or []) & PRODUCERS:
                moment = observed.get((event.pk, source))
                if moment is not None and moment >= when - STEP_S:
                    firsts[source] = min(firsts.get(source, moment), moment)
        for source, moment in firsts.items():
            latency[source].append(moment - when)
            latency_by_kind[(source, key)].append(moment - when)
        if not event_kinds:
            unseen[key] += 1
            continue
        events = [event for event in on_node if event.kind in event_kinds]
        timed_events = [event for event in events if event.kind == event_kinds[0]]
        if not timed_events:
            wrong.append(f"{key} on {node.hostname}: no {event_kinds[0]} event")
            continue
        # Right: the policy for one of the fault's events took its action (a quarantine: drained, or deferred to
        # the job's checkpoint).
        handled = decisions.filter(event__in=events, policy__kind_pattern__in=event_kinds, action=action)
        if handled.filter(outcome__in=("acted", "deferred")).exists():
            right += 1
        else:
            outcome = handled.values_list("outcome", "reason").first()
            wrong.append(f"{key} on {node.hostname}: {outcome or 'no decision'}")
    seeable = sum(by_kind.values()) - sum(unseen.values())
    healthy_ids = [node.pk for node in healthy]
    healthy_events = HealthEvent.objects.filter(node_id__in=healthy_ids).count()
    not_faulted = Node.objects.filter(role="compute").exclude(hostname__in=faulted | leaf_hosts)
    quarantined_healthy = sorted(
        decisions.filter(node__in=not_faulted, action="quarantine", outcome__in=("acted", "deferred"))
        .values_list("node__hostname", flat=True)
        .distinct()
    )
    noise_events = Counter(HealthEvent.objects.filter(node__in=not_faulted).values_list("kind", flat=True))
    trips = list(decisions.filter(reason__startswith=remediation.BREAKER_TRIPPED))
    trip_leaf = Counter(
        (match.group("leaf") if (match := remediation.SUSPECT_LEAF.search(d.reason)) else "") for d in trips
    )
    trips_elsewhere = [d.node.hostname for d in trips if d.event.kind != "link_down"]
    leaf_taken = decisions.filter(event__kind="link_down", outcome__in=("acted", "deferred")).count()
    drained = decisions.filter(outcome="acted", training_job__isnull=False, steps_lost__isnull=False)
    aware_h = sum(d.steps_lost * d.seconds_per_step * d.gpus for d in drained) / 3600
    at_once_h = (
        sum(
            (d.decided_step - d.checkpoint_before) * d.seconds_per_step * d.gpus
            for d in drained
            if d.decided_step is not None and d.checkpoint_before is not None
        )
        / 3600
    )
    # Power cycles: from the decision to the node answering again (its node_unreachable cleared by a read).
    cycles = []
    for d in decisions.filter(action="power_cycle", outcome="acted"):
        d.event.refresh_from_db()
        cycles.append((d.event.cleared_at - d.decided_at).total_seconds() if d.event.cleared_at else None)
    # MTTR: from the node's drain (the decision, or its deferred drain) to the repair's return.
    mttr_rows = []
    for repair in Repair.objects.select_related("node").order_by("opened_at", "pk"):
        taken = repair.decisions.filter(outcome="acted").order_by("decided_at").first()
        drained_at = (taken.drained_at or taken.decided_at) if taken else repair.opened_at
        gates = list(repair.gates.order_by("started_at", "pk").values_list("state", flat=True))
        step = plans.get(repair.pk, {})
        kinds = sorted(set(repair.events.values_list("kind", flat=True)))
        row = {
            "node": repair.node.hostname,
            "kinds": kinds,
            "state": repair.state,
            "gate": repair.gate_kind,
            "gates": gates,
            "part": step.get("part", ""),
            "parts": repair.parts.count(),
            "mttr_s": (repair.closed_at - drained_at).total_seconds() if repair.state == "returned" else None,
            "why": step.get("why") or (repair.notes.splitlines()[-1] if repair.notes else ""),
            "in_service": not Node.objects.get(pk=repair.node_id).is_drained,
            "open_after": sorted(
                HealthEvent.objects.filter(node=repair.node).open().values_list("kind", flat=True)
            ) if repair.state == "returned" else [],
        }  # fmt: skip
        mttr_rows.append(row)
    resume_jobs = Counter(
        Job.objects.filter(
            public_id__in=Repair.objects.exclude(resume_job_id=None).values("resume_job_id")
        ).values_list("status", flat=True)
    )

    def cost(name: str) -> dict:
        rows = costs.get(name, [])
        return {
            "runs": len(rows),
            "wall_s": sum(w for w, _ in rows),
            "cpu_s": sum(c for _, c in rows),
            "wall_per_run": sum(w for w, _ in rows) / len(rows) if rows else None,
            "cpu_per_run": sum(c for _, c in rows) / len(rows) if rows else None,
        }

    return {
        "nodes": nodes,
        "seed": seed,
        "faults": len(injected),
        "kinds": len(by_kind),
        "by_kind": dict(by_kind),
        "leaf": leaf.name if leaf else None,
        "leaf_nodes": len(leaf_hosts),
        "leaf_taken": leaf_taken,
        "simulated_s": end_s,
        "finished_s": finished_s,
        "steps": steps,
        "campaign_steps": campaign_steps,
        "latency": {
            source: {"n": len(v), "p50": _percentile(v, 0.5), "p95": _percentile(v, 0.95)}
            for source, v in latency.items()
        },
        "latency_by_kind": {
            f"{source}/{key}": {"n": len(v), "p50": _percentile(v, 0.5), "p95": _percentile(v, 0.95)}
            for (source, key), v in sorted(latency_by_kind.items())
        },
        "right": right,
        "seeable": seeable,
        "unseen": dict(unseen),
        "wrong": wrong,
        "healthy_watched": len(healthy),
        "healthy_events": healthy_events,
        "noise_events": dict(noise_events),
        "quarantined_healthy": quarantined_healthy,
        "trips": len(trips),
        "trip_leaf": dict(trip_leaf),
        "trips_elsewhere": trips_elsewhere,
        "drained_under_job": drained.count(),
        "drains": [
            [
                d.kind,
                d.node.hostname,
                d.decided_step,
                d.checkpoint_before,
                d.drained_step,
                d.steps_lost,
                d.reason.split(": ", 1)[-1].split(". ", 1)[0],
            ]
            for d in drained.order_by("decided_at")
        ],  # fmt: skip
        "aware_gpu_h": aware_h,
        "at_once_gpu_h": at_once_h,
        "cycles": cycles,
        "repairs": mttr_rows,
        "resume_jobs": dict(resume_jobs),
        "costs": {name: cost(name) for name in costs},
        "load_s": loaded_s,
        "wall_s": time.perf_counter() - started,
        "cpu_s": time.process_time() - cpu_started,
        "load_before": load_before,
        "load_after": os.getloadavg(),
    }


def _report(r: dict) -> None:
    def fmt(value):
        return "-" if value is None else f"{value:.0f}"

    def hours(seconds):
        return "-" if seconds is None else f"{seconds / 3600:.1f} h"

    print(f"Lifecycle on the simulated cluster: {r['nodes']} compute nodes, seed {r['seed']}")
    mix = ", ".join(f"{kind} {count}" for kind, count in r["by_kind"].items())
    print(
        f"  campaign: {r['faults']} faults of {r['kinds']} kinds ({mix}),"
        f" plus leaf {r['leaf']} down ({r['leaf_nodes']} nodes); {r['simulated_s'] / 3600:.1f} h simulated in"
        f" {r['campaign_steps']} steps of {STEP_S} s, then the repairs to {r['finished_s'] / 3600:.1f} h"
        f" ({r['steps']} steps in all)"
    )
    print("detection latency (fault -> the producer's run that first recorded an event on the node, simulated s):")
    for source, row in r["latency"].items():
        print(f"  {source:<12} n={row['n']:<3} p50 {fmt(row['p50'])} s  p95 {fmt(row['p95'])} s")
    by_kind = "; ".join(f"{name} n={row['n']} p50 {fmt(row['p50'])} s" for name, row in r["latency_by_kind"].items())
    print(f"  by producer and fault: {by_kind}")
    print("  leaf link_down: not measured (no periodic producer sees a NIC down; recorded as the back-test does)")
    share = 100 * r["right"] / r["seeable"] if r["seeable"] else 0
    print(
        f"right policy: {r['right']}/{r['seeable']} faults a driven producer can see ({share:.1f} %, goal >= 95 %);"
        f" not seen by any: {sum(r['unseen'].values())} ({', '.join(sorted(r['unseen']))})"
    )
    for line in r["wrong"]:
        print(f"  missed: {line}")
    print(
        f"healthy nodes quarantined: {len(r['quarantined_healthy'])} fault-free (goal 0)"
        f" {' '.join(r['quarantined_healthy'])}, and {r['leaf_taken']} behind the leaf (the switch was at fault)"
        f" before the breaker tripped;"
        f" {r['healthy_watched']} healthy nodes watched all campaign: {r['healthy_events']} events on them;"
        f" noise events on fault-free nodes: {r['noise_events'] or 'none'}"
    )
    leaves = "; ".join(f"'{leaf or '(no leaf named)'}' x{n}" for leaf, n in r["trip_leaf"].items()) or "none"
    print(
        f"breaker trips: {r['trips']} (naming: {leaves}); trips elsewhere: {len(r['trips_elsewhere'])}"
        f" {' '.join(r['trips_elsewhere'])}"
    )
    cycles = [c for c in r["cycles"] if c is not None]
    print(
        f"power cycles (node not answering): {len(r['cycles'])}, answering again (node_unreachable cleared by a read)"
        f" {len(cycles)}, p50 {fmt(_percentile(cycles, 0.5))} s after the decision"
    )
    rows = r["repairs"]
    back = [row for row in rows if row["mttr_s"] is not None]
    once = [row["mttr_s"] for row in back if len(row["gates"]) == 1]
    again = [row["mttr_s"] for row in back if len(row["gates"]) > 1]
    mean = sum(row["mttr_s"] for row in back) / len(back) if back else None
    print(
        f"time to return to service (drain -> returned through the scheduler): {len(rows)} repairs, {len(back)}"
        f" returned, p50 {hours(_percentile([row['mttr_s'] for row in back], 0.5))}, mean {hours(mean)};"
        f" gate passed first time: {len(once)}, p50 {hours(_percentile(once, 0.5))};"
        f" after a failed gate: {len(again)}, p50 {hours(_percentile(again, 0.5))};"
        f" resume jobs: {r['resume_jobs'] or 'none'}"
    )
    for row in rows:
        print(
            f"  {row['node']} {','.join(row['kinds'])}: {row['state']}, {row['gate']} gate {'/'.join(row['gates'])},"
            f" part {row['part'] or '-'} ({row['parts']} recorded), {hours(row['mttr_s'])}"
            + (f"; open after: {','.join(row['open_after'])}" if row["open_after"] else "")
            + ("" if row["mttr_s"] is not None else f"; not returned: {row['why']}")
        )
    print(
        f"GPU-hours lost, {counted(r['drained_under_job'], 'quarantine')} under the training job: checkpoint-aware"
        f" {r['aware_gpu_h']:.2f}, draining at once {r['at_once_gpu_h']:.2f} (each decision against its own"
        " counterfactual: an earlier drain's resume rolls the job back for the later ones too)"
    )
    for kind, host, decided, before, drained, lost, why in r["drains"]:
        print(
            f"  {kind} on {host}: decided at step {decided} (save {before}: {decided - before} at once),"
            f" drained at {drained} ({lost} lost): {why}"
        )
    print(f"cost per run at {r['nodes']} nodes (wall / CPU s of this process):")
    for name, row in r["costs"].items():
        if row["runs"]:
            print(
                f"  {name:<16} {row['runs']:>4} runs: {row['wall_per_run']:.2f} / {row['cpu_per_run']:.2f} s a run"
                f" ({row['wall_s']:.0f} / {row['cpu_s']:.0f} s in all)"
            )
    watch = r["costs"].get("watch")
    if watch and watch["runs"]:
        print(f"  the watch every {STEP_S} s: {100 * watch['cpu_per_run'] / STEP_S:.0f} % of one core")
    load = "/".join(f"{value:.1f}" for value in r["load_before"]), "/".join(f"{value:.1f}" for value in r["load_after"])
    print(
        f"wall: {r['wall_s']:.0f} s, CPU {r['cpu_s']:.0f} s (cluster load {r['load_s']:.0f} s); load average"
        f" {load[0]} before, {load[1]} after"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=512)
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--faults", type=int, default=55)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.nodes, args.seed, args.faults)))
        return
    child_args = ["--nodes", str(args.nodes), "--seed", str(args.seed), "--faults", str(args.faults)]
    _report(run_on_fresh_sqlite(str(ROOT / "bench" / "lifecycle.py"), "lifecycle", child_args))


if __name__ == "__main__":
    sys.exit(main())
