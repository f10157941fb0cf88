"""The fault lifecycle, measured (issue 25): a seeded campaign of simulator faults on the demo cluster at a size, on a
simulated clock, through the producers, the remediation evaluator and the checkpoint-aware quarantine, as the
periodic tasks run them. Every figure is counted from what the code did; one it cannot measure says why.

    .venv/bin/python bench/lifecycle.py                    # 512 nodes, seed 25
    .venv/bin/python bench/lifecycle.py --nodes 64 --seed 7

Runs on a throwaway SQLite database under var/bench/lifecycle/ with the demo cluster at --nodes compute nodes and
these policies on: XID 79, uncorrectable ECC and a failed row remap → quarantine; a NIC link down → quarantine (so a
leaf switch going down meets the circuit breaker: BREAKER below); NVLink (XID 74), thermal
and power-brake slowdowns, a downtrained PCIe link, a pending row remap, XID 48 → notify.

The campaign: --faults simulator faults (`inject_fault`, the SimFault's time set to the simulated moment it strikes)
of the eleven kinds of the mix below, round robin, on a GPU (a NIC, a mount) of a random node, a minute apart, and
halfway one leaf switch down: a `nic_down` on the NIC of every node cabled to the back-test campaign's leaf
(apps/remediation/campaign.py, leaf_nodes()). A 4-node training job (a save every 200 steps of 6 s) runs on the nodes
of the first four quarantine faults. The clock steps 30 s; each step runs the telemetry watch at `now` over the whole
fleet (the model's noise included), then `evaluate(now=…)` and `settle_deferred(now=…)`.

What is driven and what is not: the telemetry watch is the only producer run each step. No periodic producer on this
branch sees a NIC link down (the sweep and the runbooks do, on demand), so the leaf's `link_down` events are recorded as
the back-test's campaign records them, at the first step after the switch goes down (its latency is not a detection).
The kernel-log and SEL reads are jobs over the node transport; they are not run here (they would see the same GPU faults
later: 300 s periods). The training job's progress is modelled here (a step every 6 s, a save every 200 steps, written
as the `training-progress` read writes it): the simulated job's log reads Django's clock (apps/simulator/clock.py),
which this bench does not set: it steps its own through `now=`. Faults the watch cannot see (a degraded cable, a wrong
MTU, a full disk…) are injected and counted as not detected. The 100 healthy runs: 100 nodes with no fault (and not
behind the leaf) watched through the whole campaign; any event or decision on them is a false alarm.
"""

import argparse
import json
import random
import sys
import time
from collections import Counter, defaultdict

from child import ROOT, run_on_fresh_sqlite, setup_django

STEP_S = 30  # the telemetry watch's period (RACKPILOT_PERIODIC_TASKS), and the evaluator's clock step
FAULT_GAP_S = 60
# The breaker: 4 nodes (or 5 % of the fleet) in 10 minutes. The campaign is a fleet's weeks compressed into about
# two simulated hours (the watch over 512 nodes every 30 s is what the bench's time goes on), so its window is
# short: the GPU faults put at most three quarantines in any 10 minutes, and pause for two windows around the leaf.
BREAKER = {"breaker_max_nodes": 4, "breaker_max_percent": 5, "breaker_window_minutes": 10}
LEAF_PAUSE_S = 2 * 10 * 60 + FAULT_GAP_S
AFTER_S = 30 * 60  # the clock runs on after the last fault: the deferred drains' deadlines (critical: 15 min)
SECONDS_PER_STEP, CHECKPOINT_EVERY = 6.0, 200
# The campaign's faults -> (the simulator fault's parameters, the event kinds the watch should record, the first the
# one its detection is timed on, and the action the policy for them takes). No kinds: no periodic producer on this
# branch sees it.
MIX = {  # in this order, round robin: the quarantines three or four faults apart
    "xid79": ({}, ("xid79",), "quarantine"),
    "thermal": ({"temperature": 95}, ("gpu_thermal_slowdown",), "notify"),
    "power_cap": ({"watts": 300}, (), None),
    "mtu": ({"mtu": 1500}, (), None),
    "ecc": ({"count": 2}, ("ecc_uncorrectable",), "quarantine"),
    "nvlink_down": ({"link": 3}, ("xid74",), "notify"),
    "degraded_cable": ({"rate_gbps": 200, "crc_per_million": 50}, (), None),
    "straggler": ({"sm_clock_mhz": 1200}, (), None),
    # More rows than a bank spares: a failed remap, and the uncorrectable errors too (whichever is quarantined
    # first, the other's decision is refused: one drain per node).
    "ecc_exhausted": ({"count": 9}, ("row_remap_failure", "ecc_uncorrectable"), "quarantine"),
    "pcie_downtrained": ({"gen": 4, "width": 8}, ("pcie_downtrained",), "notify"),
    "disk_full": ({}, (), None),
}
POLICIES = (
    ("xid79", "critical", "quarantine"),
    ("ecc_uncorrectable", "major", "quarantine"),
    ("row_remap_failure", "critical", "quarantine"),
    ("link_down", "critical", "quarantine"),
    ("xid74", "major", "notify"),
    ("gpu_thermal_slowdown", "minor", "notify"),
    ("gpu_power_brake_slowdown", "major", "notify"),
    ("pcie_downtrained", "minor", "notify"),
    ("row_remap_pending", "major", "notify"),
    ("xid48", "major", "notify"),
)


def _percentile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered) + 0.5) - 1))]


def measure(nodes: int, seed: int, faults: int) -> dict:
    setup_django()
    import datetime as dt

    from django.core.management import call_command

    from apps.health import services as health
    from apps.health.choices import Severity, Source
    from apps.health.models import HealthEvent
    from apps.inventory.demo import ClusterShape, load_cluster
    from apps.inventory.models import Node
    from apps.jobs import services as job_services
    from apps.monitoring import watch
    from apps.remediation import campaign
    from apps.remediation import services as remediation
    from apps.remediation.models import RemediationDecision, RemediationPolicy
    from apps.simulator import services as sim
    from apps.simulator.models import SimFault
    from apps.workloads.choices import TrainingState
    from apps.workloads.models import TrainingJob, TrainingJobNode, TrainingProgress

    started = time.perf_counter()
    call_command("migrate", verbosity=0)
    load_cluster(ClusterShape(compute_nodes=nodes))
    job_services.enqueue = lambda job: None  # the drains' scheduler jobs are created, not run
    loaded_s = time.perf_counter() - started
    t0 = (int(time.time()) // 86_400 - 1) * 86_400  # yesterday's midnight: the whole campaign is in the past

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
        elif kind == "straggler":
            target = ""
        else:
            target = str(rng.choice(list(node.gpus.values_list("index", flat=True))))
        # Halfway, the leaf goes down; the GPU faults pause for the breaker's window after it (a quarantine refused
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

    injected = []  # (at_s, SimFault or None, mix key, node)
    pending = sorted(plan, key=lambda row: row[0])
    watch_s, remediation_s, steps = 0.0, 0.0, 0
    end_s = max(pending[-1][0], leaf_at) + AFTER_S
    leaf_recorded = None
    now_s = 0
    while now_s <= end_s:
        while pending and pending[0][0] <= now_s:
            when, node, kind, key, target, parameters = pending.pop(0)
            fault = sim.inject_fault(node=node, kind=kind, target=target, parameters=parameters)
            SimFault.objects.filter(pk=fault.pk).update(created=at(when))
            injected.append((when, fault, key, node))
        if leaf_recorded is None and now_s >= leaf_at and leaf is not None:
            for nic in leaf_nics:
                fault = sim.inject_fault(node=nic.node, kind="nic_down", target=nic.name)
                SimFault.objects.filter(pk=fault.pk).update(created=at(leaf_at))
            # No periodic producer sees a NIC down: recorded as the back-test's campaign records a leaf down.
            for second, nic in enumerate(leaf_nics):
                health.record_event(
                    component=nic, source=Source.TELEMETRY, kind="link_down", severity=Severity.CRITICAL,
                    summary=f"{nic.name}: link down (leaf {leaf.name})", at=at(now_s + min(second, STEP_S - 1)),
                )  # fmt: skip
            leaf_recorded = now_s
        progress(now_s)
        clock = time.perf_counter()
        watch.watch_telemetry(now=t0 + now_s)
        watch_s += time.perf_counter() - clock
        clock = time.perf_counter()
        remediation.evaluate(now=at(now_s), transport="sim")
        for decision in remediation.settle_deferred(now=at(now_s), transport="sim"):
            resumed(decision)
        remediation_s += time.perf_counter() - clock
        steps += 1
        now_s += STEP_S

    # --- the figures, from the events and decisions recorded
    latency: dict[str, list[float]] = defaultdict(list)
    right, wrong, unseen, by_kind = 0, [], Counter(), Counter()
    decisions = RemediationDecision.objects.select_related("event", "policy", "node")
    for when, _fault, key, node in injected:
        _, event_kinds, action = MIX[key]
        by_kind[key] += 1
        if not event_kinds:
            unseen[key] += 1
            continue
        events = list(HealthEvent.objects.filter(node=node, kind__in=event_kinds))
        timed = [event for event in events if event.kind == event_kinds[0]]
        if not timed:
            wrong.append(f"{key} on {node.hostname}: no {event_kinds[0]} event")
            continue
        latency[timed[0].source].append(timed[0].first_seen.timestamp() - (t0 + when))
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
        "steps": steps,
        "latency": {
            source: {"n": len(v), "p50": _percentile(v, 0.5), "p95": _percentile(v, 0.95)}
            for source, v in latency.items()
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
        "load_s": loaded_s,
        "watch_s": watch_s,
        "remediation_s": remediation_s,
        "wall_s": time.perf_counter() - started,
    }


def _report(r: dict) -> None:
    def fmt(value):
        return "-" if value is None else f"{value:.0f}"

    print(f"Lifecycle on the simulated cluster: {r['nodes']} compute nodes, seed {r['seed']}")
    mix = ", ".join(f"{kind} {count}" for kind, count in r["by_kind"].items())
    print(
        f"  campaign: {r['faults']} faults of {r['kinds']} kinds ({mix}),"
        f" plus leaf {r['leaf']} down ({r['leaf_nodes']} nodes); {r['simulated_s'] / 3600:.1f} h simulated in"
        f" {r['steps']} steps of {STEP_S} s"
    )
    print("detection latency (fault -> event first_seen, simulated s):")
    for source, row in r["latency"].items():
        print(f"  {source:<12} n={row['n']:<3} p50 {fmt(row['p50'])} s  p95 {fmt(row['p95'])} s")
    print("  kernel_log, bmc_log: not measured (jobs over the node transport, not run in this loop)")
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
    leaves = ", ".join(f"{leaf or '(no leaf named)'} x{n}" for leaf, n in r["trip_leaf"].items()) or "none"
    print(
        f"breaker trips: {r['trips']} (naming: {leaves}); trips elsewhere: {len(r['trips_elsewhere'])}"
        f" {' '.join(r['trips_elsewhere'])}"
    )
    print("mean time to return to service: not measured (no repair flow on this branch)")
    print(
        f"GPU-hours lost, {r['drained_under_job']} quarantine(s) under the training job: checkpoint-aware"
        f" {r['aware_gpu_h']:.2f}, draining at once {r['at_once_gpu_h']:.2f} (each decision against its own"
        " counterfactual: an earlier drain's resume rolls the job back for the later ones too)"
    )
    for kind, host, decided, before, drained, lost, why in r["drains"]:
        print(
            f"  {kind} on {host}: decided at step {decided} (save {before}: {decided - before} at once),"
            f" drained at {drained} ({lost} lost): {why}"
        )
    print(
        f"wall: {r['wall_s']:.0f} s (cluster load {r['load_s']:.0f} s, watch {r['watch_s']:.0f} s,"
        f" evaluate+settle {r['remediation_s']:.0f} s)"
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
