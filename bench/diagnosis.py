"""Runbook 1 (NCCL timeout / hang) against every fault kind that can hurt a training job, injected alone on a random
node of a simulated training job (the network faults, a lost GPU, and for its storage / data-loader branch a mount
whose server stops answering and a full checkpoint volume), then runbook 3 (training interrupted) against a full
disk and a lost GPU, then runbook 2 (GPU utilisation fluctuating) against a power cap, a thermal slowdown, a
straggler, a starving data loader and a second trainer on a node: how often it names the right cause and node
(runbook 3: and the newest valid checkpoint; runbook 2: and the fix for that node or GPU), false alarms on
fault-free runs, and time and commands to a verdict.

    .venv/bin/python bench/diagnosis.py                  # 10 trials per fault kind, 10 fault-free (runbook 2: 100)
    .venv/bin/python bench/diagnosis.py --trials 25
    .venv/bin/python bench/diagnosis.py --runbook 2 --healthy 100

Runs on a throwaway SQLite database under var/bench/diagnosis/ with the demo cluster, a 4-node training job (8 ranks
per node) started two hours ago, and, per trial, one fault struck 30 minutes ago on a node chosen by a seeded RNG
(its target too: a data NIC, a GPU). The incident is opened on the training job and the runbook's log and network
phases run in this process over the `sim` transport, as a worker would. A trial is right when the concluded cause is
the fault's and the faulty node is among the suspects (fault-free: nothing concluded and no fault evidence, else a
false alarm). Printed: the confusion table (rows injected, columns concluded), accuracy per kind, false alarms,
median seconds and commands per verdict.
"""

import argparse
import json
import random
import statistics
import sys
import time
from collections import Counter, defaultdict

from child import demo_cluster_on_sim, run_on_fresh_sqlite, run_shards_here, setup_django

HOSTS = ("gpu001", "gpu002", "gpu003", "gpu004")
# Fault kind -> (the cause runbook 1 should conclude, how to pick the fault's target on the node).
FAULTS = {
    "pfc_off": ("pfc_off", lambda rng, nics, gpus: "3"),
    "mtu": ("mtu_mismatch", lambda rng, nics, gpus: rng.choice(nics)),
    "nic_down": ("link_down", lambda rng, nics, gpus: rng.choice(nics)),
    "xid79": ("gpu_lost", lambda rng, nics, gpus: str(rng.choice(gpus))),
    # The storage / data-loader branch: the NFS checkpoint mount or the Lustre data mount stops answering.
    "storage_slow": ("storage_slow", lambda rng, nics, gpus: rng.choice(["/checkpoints", "/shared"])),
    "disk_full": ("checkpoint_disk_full", lambda rng, nics, gpus: "/checkpoints"),
    "none": ("none", None),  # a healthy job: nothing to conclude, and no fault evidence
}
# Runbook 3 (training interrupted): fault kind -> (the cause it should conclude, the fault's target). A trial is
# right when the cause is the fault's, a recovery is proposed whose resume step is the newest checkpoint the
# simulated job saved completely before it stopped, and (a lost GPU) the faulty node is not among its nodes.
RECOVERY_FAULTS = {
    "disk_full": ("checkpoint_disk_full", lambda rng, nics, gpus: "/checkpoints"),
    "xid79": ("bad_node", lambda rng, nics, gpus: str(rng.choice(gpus))),
}
# Runbook 2 (GPU utilisation fluctuating): fault kind -> (the cause, the target, the fault's parameters drawn from
# their ranges, and what its fix must name). A trial is right when the cause is the fault's, the node is among the
# suspects (the data loader: every GPU dips, so the whole job) and the proposed fix is that fault's for that node
# or GPU. The job runs under Kubernetes (Slurm for the *_slurm rows), so a node behind with nothing holding its
# clocks has its placement read on the scheduler controller.
UTILISATION_FAULTS = {
    "power_cap": (
        "gpu_power_capped",
        lambda rng, gpus: str(rng.choice(gpus)),
        lambda rng: {"watts": rng.randint(250, 550)},
        lambda host, target, fix: (
            [(c["hostname"], c["values"]["gpu_index"]) for c in fix.commands] == [(host, int(target))]
        ),
    ),
    "thermal": (
        "gpu_thermal",
        lambda rng, gpus: str(rng.choice(gpus)),
        lambda rng: {"temperature": rng.randint(85, 105)},
        lambda host, target, fix: f"{host} GPU {target}" in fix.summary and "Cooling" in fix.summary,
    ),
    "straggler": (
        "gpu_clocks_capped",
        lambda rng, gpus: "",
        lambda rng: {"sm_clock_mhz": rng.randint(900, 1500)},
        lambda host, target, fix: host in fix.summary and "-rac" in fix.summary,
    ),
    "dataloader_stall": (
        "dataloader_stall",
        lambda rng, gpus: "",
        lambda rng: {"period_s": rng.randint(2, 8), "stall_pct": rng.randint(20, 60)},
        lambda host, target, fix: "num_workers" in fix.summary,
    ),
    "co_located": (
        "co_located_trainer",
        lambda rng, gpus: "",
        lambda rng: {"speed_pct": rng.randint(40, 80)},
        lambda host, target, fix: host in fix.summary and "podAntiAffinity" in fix.artefact,
    ),
    # The same fault under a Slurm launcher: the controller's `scontrol show job -d`, the exclusive requeue.
    "co_located_slurm": (
        "co_located_trainer",
        lambda rng, gpus: "",
        lambda rng: {"speed_pct": rng.randint(40, 80)},
        lambda host, target, fix: host in fix.summary and "OverSubscribe=NO" in fix.artefact,
    ),
}
SLURM_KINDS = {"co_located_slurm": "co_located"}  # bench row -> the fault injected, on a Slurm-launched job


def _clear() -> None:
    """Before a trial: no fault, no change a command made, no incident."""
    from apps.diagnosis.models import Incident
    from apps.simulator.models import SimChange, SimFault

    SimFault.objects.all().delete()
    SimChange.objects.all().delete()
    Incident.objects.all().delete()


def _run_runbook(job, operator, runbook: str, phases: tuple):
    """Open an incident on the training job with this runbook and run its phases here, as a worker would."""
    from apps.diagnosis import services

    incident = services.open_incident(user=operator, training_job=job, transport="sim", runbook=runbook)
    services.start_runbook(incident=incident, user=operator)
    for phase in phases:
        phase_job = incident.jobs.filter(parameters__phase=phase).order_by("-created").first()
        if phase_job is not None:
            run_shards_here(phase_job)
        incident.refresh_from_db()
    return incident


def measure(trials: int, seed: int, runbooks: str = "123", healthy: int = 100) -> dict:
    setup_django()
    from datetime import timedelta

    from django.utils import timezone

    from apps.accounts.choices import Role
    from apps.accounts.models import User
    from apps.diagnosis.phases import Phase
    from apps.inventory.models import Node
    from apps.simulator import services as sim
    from apps.simulator.models import SimFault
    from apps.workloads.choices import TrainingState
    from apps.workloads.models import TrainingJob, TrainingJobNode

    counter = demo_cluster_on_sim(32)
    operator = User.objects.create_user("bench", password="bench-only-password", role=Role.OPERATOR)
    job = TrainingJob.objects.create(
        name="llm-pretrain",
        ranks_per_node=8,
        checkpoint_dir="/checkpoints/llm-pretrain",
        checkpoint_interval_steps=200,
        log_path="/var/log/train/llm-pretrain.log",
        state=TrainingState.RUNNING,
        started_at=timezone.now() - timedelta(hours=2),
    )
    for rank, hostname in enumerate(HOSTS):
        TrainingJobNode.objects.create(job=job, node=Node.objects.get(hostname=hostname), node_rank=rank)

    rng = random.Random(seed)
    confusion: dict[str, Counter] = defaultdict(Counter)
    right: Counter = Counter()
    seconds, commands, false_alarms = [], [], 0
    for kind, (expected, pick_target) in FAULTS.items() if "1" in runbooks else ():
        for _ in range(trials):
            _clear()
            host = rng.choice(HOSTS)
            node = Node.objects.get(hostname=host)
            if pick_target is not None:
                nics = sorted(node.nics.filter(purpose="data").values_list("name", flat=True))
                gpus = sorted(node.gpus.values_list("index", flat=True))
                fault = sim.inject_fault(node=node, kind=kind, target=pick_target(rng, nics, gpus))
                SimFault.objects.filter(pk=fault.pk).update(created=timezone.now() - timedelta(minutes=30))
            calls, started = counter.calls, time.perf_counter()
            incident = _run_runbook(job, operator, "nccl-timeout", (Phase.LOG, Phase.NETWORK, Phase.STORAGE))
            seconds.append(time.perf_counter() - started)
            commands.append(counter.calls - calls)
            concluded = incident.cause or "none"
            confusion[kind][concluded] += 1
            suspects = list(incident.suspect_nodes.order_by("hostname").values_list("hostname", flat=True))
            named_node = kind == "none" or host in suspects
            if concluded == expected and named_node:
                right[kind] += 1
            if kind == "none" and (concluded != expected or incident.evidence.filter(verdict="fault").exists()):
                false_alarms += 1
    recovery = _measure_recovery(trials, rng, job, operator, counter) if "3" in runbooks else None
    utilisation = _measure_utilisation(trials, healthy, rng, job, operator, counter) if "2" in runbooks else None
    return {
        "recovery": recovery,
        "utilisation": utilisation,
        "trials": trials,
        "confusion": {kind: dict(row) for kind, row in confusion.items()},
        "right": dict(right),
        "false_alarms": false_alarms,
        "median_seconds": statistics.median(seconds) if seconds else 0.0,
        "median_commands": statistics.median(commands) if commands else 0,
    }


def _measure_recovery(trials, rng, job, operator, counter) -> dict:
    from datetime import timedelta

    from django.utils import timezone

    from apps.diagnosis.phases import Phase
    from apps.diagnosis.simulation import training_run
    from apps.inventory.models import Node
    from apps.simulator import services as sim
    from apps.simulator.models import SimFault
    from apps.simulator.training import simulate
    from apps.simulator.training_faults import disruptions, with_resumes

    confusion: dict[str, Counter] = defaultdict(Counter)
    right: Counter = Counter()
    seconds, commands = [], []
    for kind, (expected, pick_target) in RECOVERY_FAULTS.items():
        for _ in range(trials):
            _clear()
            host = rng.choice(HOSTS)
            node = Node.objects.get(hostname=host)
            nics = sorted(node.nics.filter(purpose="data").values_list("name", flat=True))
            gpus = sorted(node.gpus.values_list("index", flat=True))
            fault = sim.inject_fault(node=node, kind=kind, target=pick_target(rng, nics, gpus))
            SimFault.objects.filter(pk=fault.pk).update(created=timezone.now() - timedelta(minutes=rng.randint(20, 90)))
            run = with_resumes(training_run(job))
            saved = simulate(run, disruptions(run), time.time()).checkpoints
            calls, started = counter.calls, time.perf_counter()
            incident = _run_runbook(job, operator, "training-interrupted", (Phase.LOG, Phase.CHECKS))
            seconds.append(time.perf_counter() - started)
            commands.append(counter.calls - calls)
            concluded = incident.cause or "none"
            confusion[kind][concluded] += 1
            plan = incident.remediations.first().plan if incident.remediations.exists() else {}
            newest = max(saved, default=None)
            if (
                concluded == expected
                and plan.get("resume_step") == newest
                and (kind != "xid79" or host not in plan.get("hosts", []))
            ):
                right[kind] += 1
    return {
        "confusion": {kind: dict(row) for kind, row in confusion.items()},
        "right": dict(right),
        "median_seconds": statistics.median(seconds),
        "median_commands": statistics.median(commands),
    }


def _measure_utilisation(trials, healthy, rng, job, operator, counter) -> dict:
    from datetime import timedelta

    from django.utils import timezone

    from apps.diagnosis.phases import Phase
    from apps.inventory.models import Node
    from apps.simulator import services as sim
    from apps.simulator.models import SimFault
    from apps.workloads.choices import Launcher

    job.launcher = Launcher.KUBERNETES
    job.save(update_fields=["launcher"])
    confusion: dict[str, Counter] = defaultdict(Counter)
    right: Counter = Counter()
    seconds, commands, false_alarms = [], [], 0
    plan = [(kind, trials) for kind in UTILISATION_FAULTS] + [("none", healthy)]
    for kind, count in plan:
        for _ in range(count):
            _clear()
            host, target = rng.choice(HOSTS), ""
            job.launcher = Launcher.SLURM if kind in SLURM_KINDS else Launcher.KUBERNETES
            job.save(update_fields=["launcher"])
            if kind != "none":
                expected, pick_target, pick_parameters, names_fix = UTILISATION_FAULTS[kind]
                node = Node.objects.get(hostname=host)
                target = pick_target(rng, sorted(node.gpus.values_list("index", flat=True)))
                fault = sim.inject_fault(
                    node=node, kind=SLURM_KINDS.get(kind, kind), target=target, parameters=pick_parameters(rng)
                )
                SimFault.objects.filter(pk=fault.pk).update(created=timezone.now() - timedelta(minutes=30))
            calls, started = counter.calls, time.perf_counter()
            incident = _run_runbook(job, operator, "gpu-utilisation", (Phase.SAMPLE, Phase.SCHEDULER))
            seconds.append(time.perf_counter() - started)
            commands.append(counter.calls - calls)
            concluded = incident.cause or "none"
            confusion[kind][concluded] += 1
            if kind == "none":
                if concluded != "none" or incident.evidence.filter(verdict="fault").exists():
                    false_alarms += 1
                continue
            suspects = set(incident.suspect_nodes.values_list("hostname", flat=True))
            fix = incident.remediations.first()
            where = kind == "dataloader_stall" or host in suspects
            if concluded == expected and where and fix is not None and names_fix(host, target, fix):
                right[kind] += 1
    return {
        "healthy": healthy,
        "confusion": {kind: dict(row) for kind, row in confusion.items()},
        "right": dict(right),
        "false_alarms": false_alarms,
        "median_seconds": statistics.median(seconds),
        "median_commands": statistics.median(commands),
    }


def _print_utilisation(result: dict, trials: int) -> None:
    found = result["utilisation"]
    expected = [cause for cause, *_ in UTILISATION_FAULTS.values()]
    causes = sorted({cause for row in found["confusion"].values() for cause in row} | set(expected))
    print(f"\nrunbook 2 (gpu-utilisation), {trials} trials per fault kind, {found['healthy']} fault-free")
    print(f"{'injected':<18}" + "".join(f"{cause[:18]:>20}" for cause in causes) + f"{'right':>8}")
    for kind in [*UTILISATION_FAULTS, "none"]:
        row = found["confusion"].get(kind, {})
        cells = "".join(f"{row.get(cause, 0):>20}" for cause in causes)
        score = f"{found['right'].get(kind, 0):>5}/{trials}" if kind != "none" else ""
        print(f"{kind:<18}{cells}{score}")
    total = sum(found["right"].values())
    runs = len(UTILISATION_FAULTS) * trials
    print(f"right cause, node/GPU and fix: {total}/{runs} ({100 * total / runs:.0f} %, goal 95 %)")
    print(f"false alarms on fault-free runs: {found['false_alarms']}/{found['healthy']} (goal 0)")
    print(f"median per verdict: {found['median_seconds']:.2f} s, {found['median_commands']:.0f} commands")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--runbook", choices=["all", "1", "2", "3"], default="all")
    parser.add_argument("--healthy", type=int, default=100, help="runbook 2's fault-free trials")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    runbooks = "123" if args.runbook == "all" else args.runbook
    if args.child:
        print(json.dumps(measure(args.trials, args.seed, runbooks, args.healthy)))
        return
    options = ["--trials", str(args.trials), "--seed", str(args.seed), "--runbook", args.runbook]
    result = run_on_fresh_sqlite(__file__, "diagnosis", [*options, "--healthy", str(args.healthy)])
    if "1" in runbooks:
        _print_nccl_timeout(result, args.seed)
    if "3" in runbooks:
        _print_recovery(result)
    if "2" in runbooks:
        _print_utilisation(result, result["trials"])


def _print_nccl_timeout(result: dict, seed: int) -> None:
    causes = sorted({cause for row in result["confusion"].values() for cause in row} | {e for e, _ in FAULTS.values()})
    print(f"runbook 1 (nccl-timeout), {result['trials']} trials per fault kind, seed {seed}")
    print(f"{'injected':<13}" + "".join(f"{cause[:20]:>22}" for cause in causes) + f"{'right':>8}")
    for kind in FAULTS:
        row = result["confusion"].get(kind, {})
        cells = "".join(f"{row.get(cause, 0):>22}" for cause in causes)
        print(f"{kind:<13}{cells}{result['right'].get(kind, 0):>5}/{result['trials']}")
    faulty = [kind for kind in FAULTS if kind != "none"]
    total = sum(result["right"].get(kind, 0) for kind in faulty)
    runs = len(faulty) * result["trials"]
    print(f"right cause and node: {total}/{runs} ({100 * total / runs:.0f} %, goal 95 %)")
    print(f"false alarms on fault-free runs: {result['false_alarms']}/{result['trials']} (goal 0)")
    print(f"median per verdict: {result['median_seconds']:.2f} s, {result['median_commands']:.0f} commands")


def _print_recovery(result: dict) -> None:
    recovery = result["recovery"]
    causes = sorted({cause for row in recovery["confusion"].values() for cause in row})
    print(f"\nrunbook 3 (training-interrupted), {result['trials']} trials per fault kind")
    print(f"{'injected':<10}" + "".join(f"{cause[:20]:>22}" for cause in causes) + f"{'right':>8}")
    for kind in RECOVERY_FAULTS:
        row = recovery["confusion"].get(kind, {})
        cells = "".join(f"{row.get(cause, 0):>22}" for cause in causes)
        print(f"{kind:<10}{cells}{recovery['right'].get(kind, 0):>5}/{result['trials']}")
    total = sum(recovery["right"].values())
    runs = len(RECOVERY_FAULTS) * result["trials"]
    print(f"right cause and resume step (and bad node left out): {total}/{runs} ({100 * total / runs:.0f} %)")
    print(f"median to a recovery plan: {recovery['median_seconds']:.2f} s, {recovery['median_commands']:.0f} commands")


if __name__ == "__main__":
    sys.exit(main())
