"""Benchmark services: start a run (validated: nothing is stored for bad input), execute it round by round as jobs
of the `nccl-tests` kind, name a sweep's suspects from the inventory, and accept a run as the baseline."""

import logging

from celery import current_app
from django.db import transaction
from django.db.models import Count, Max, Prefetch
from django.utils import timezone
from rest_framework import serializers

from apps.benchmarks import health_events, link_errors, recording, signals, suites, trays
from apps.benchmarks.choices import (
    ACTIVE,
    BURN_IN_DEFAULT_SECONDS,
    BURN_IN_MAX_SECONDS,
    BURN_IN_MIN_SECONDS,
    DCGM_LEVELS,
    DCGM_NOMINAL_SECONDS,
    HPL_MAX_N,
    HPL_MIN_N,
    HPL_NB,
    HPL_SUITES,
    ITERATIONS,
    MAX_BYTES,
    MAX_ITERATIONS,
    MIN_BYTES,
    MIXED_SKUS_ALLOWED,
    NODE_SUITES,
    BurnLoad,
    Collective,
    Purpose,
    RunStatus,
    Suite,
    Verdict,
)
from apps.benchmarks.kinds import MAX_MPI_HOSTS, NcclTests, NodeBenchmark
from apps.benchmarks.link_errors import cable_end
from apps.benchmarks.models import (
    Baseline,
    BenchmarkRun,
    BenchmarkTest,
    MeasurementBaseline,
    Round,
    Suspect,
)
from apps.benchmarks.references import fabric_across
from apps.benchmarks.sweep import HalvingSweep, Outcome, PlannedTest, pairwise_rounds, pairwise_suspects, round_bound
from apps.core import audit
from apps.core.choices import AuditAction
from apps.core.text import counted
from apps.inventory.choices import HostKeyState, NicPurpose
from apps.inventory.models import Nic, Node
from apps.jobs import executor
from apps.jobs import services as job_services
from apps.jobs.choices import JOB_ACTIVE
from apps.jobs.models import JobShard
from apps.jobs.services import TargetSpec
from apps.nodeexec.transports import default_transport

logger = logging.getLogger(__name__)

SWEEP_MIN_NODES = 4  # below, no known-good partner may exist within 2⌈log₂N⌉+1 rounds
PAIRWISE_MAX_NODES = 16  # 120 pairs; beyond that the sweep finds the bad node in O(log N) rounds
DEFAULT_COOLDOWN_SECONDS = 5.0
RUN_TASK = "rackpilot.benchmarks.run"
SWEEP_SIZES = (2**30, 4 * 2**30)  # a sweep judges large messages only: 1 GiB and 4 GiB


def parse_nodes(text: str) -> TargetSpec:
    """'gpu001,gpu002', 'rack:r01', 'tag:new' (mixed by commas) as a TargetSpec."""
    nodes, racks, tags = [], [], []
    for item in (part.strip() for part in (text or "").split(",")):
        if not item:
            continue
        if item.startswith("rack:"):
            racks.append(item[5:])
        elif item.startswith("tag:"):
            tags.append(item[4:])
        else:
            nodes.append(item)
    if not (nodes or racks or tags):
        raise serializers.ValidationError({"nodes": ["Name at least one node, rack:NAME or tag:NAME."]})
    return TargetSpec(nodes=tuple(nodes), racks=tuple(racks), tags=tuple(tags))


def _nodes_errors(nodes: list[Node], *, suite: str, transport: str) -> list[str]:
    errors = []
    without = [node.hostname for node in nodes if node.gpu_sku_id is None or not node.gpus.exists()]
    if without:
        errors.append(f"These nodes have no GPUs: {', '.join(without[:20])}.")
    skus = {node.gpu_sku.name for node in nodes if node.gpu_sku_id}
    if len(skus) > 1 and suite not in MIXED_SKUS_ALLOWED:
        errors.append(f"The set mixes GPU SKUs ({', '.join(sorted(skus))}); benchmark one SKU at a time.")
    if transport == "ssh":
        trusted = set(
            Node.objects.filter(pk__in=[node.pk for node in nodes], host_keys__state=HostKeyState.TRUSTED).values_list(
                "hostname", flat=True
            )
        )
        untrusted = [node.hostname for node in nodes if node.hostname not in trusted]
        if untrusted:
            errors.append(
                f"No trusted SSH host key for {', '.join(untrusted[:20])}: trust it on the node page first "
                "(the benchmark reaches every node of the set over ssh)."
            )
    if transport == "local" and len(nodes) != 1:
        errors.append("Over local the benchmark runs on the worker's own host: name exactly one node (that one).")
    if suite == Suite.SWEEP and len(nodes) < SWEEP_MIN_NODES:
        errors.append(f"A sweep needs at least {SWEEP_MIN_NODES} nodes (use nccl-pairwise for fewer).")
    if suite == Suite.PAIRWISE and len(nodes) < 2:
        errors.append("Pairwise needs at least two nodes.")
    if suite == Suite.PAIRWISE and len(nodes) > PAIRWISE_MAX_NODES:
        errors.append(f"Pairwise tests every pair: at most {PAIRWISE_MAX_NODES} nodes (use the sweep for more).")
    return errors


def nccl_environment(nodes: list[Node]) -> dict:
    """NCCL's environment for a set, as a deployment sets it up: the bootstrap socket on the management NIC,
    NCCL_IB_HCA the RDMA devices (prefix mlx5), RoCE v2 GID index 3."""
    management = Nic.objects.filter(node__in=nodes, purpose=NicPurpose.MANAGEMENT).values_list("name", flat=True)
    names = sorted(set(management))
    return {"socket_ifname": names[0] if len(names) == 1 else "^lo,docker", "ib_hca": "mlx5", "ib_gid_index": 3}


def start_run(
    *,
    suite: str,
    targets: TargetSpec,
    collective: str = Collective.ALL_REDUCE,
    min_bytes: int = MIN_BYTES,
    max_bytes: int = MAX_BYTES,
    iterations: int = ITERATIONS,
    transport: str | None = None,
    cooldown_seconds: float = DEFAULT_COOLDOWN_SECONDS,
    environment: dict | None = None,
    duration_seconds: int | None = None,
    hpl_n: int | None = None,
    burn_load: str = BurnLoad.GPU_BURN,
    link_error_tiers: link_errors.Tiers | None = None,
    requested_by=None,
    queue: bool = True,
) -> BenchmarkRun:
    """Validate and record a run; enqueue it on commit (queue=False: the caller runs execute_run itself).

    Raises serializers.ValidationError naming the field (suite, collective, min_bytes, max_bytes, iterations, nodes,
    transport, duration_seconds, hpl_n, burn_load, targets); nothing is stored then.
    """
    if suite in NODE_SUITES:
        return _start_node_run(
            suite=suite,
            targets=targets,
            transport=transport,
            duration_seconds=duration_seconds,
            hpl_n=hpl_n,
            burn_load=burn_load,
            requested_by=requested_by,
            queue=queue,
        )
    errors: dict[str, list[str]] = {}
    if suite not in Suite.values:
        errors["suite"] = [f"Unknown suite {suite!r}; known: {', '.join(Suite.values)}."]
    if collective not in Collective.values:
        errors["collective"] = [f"Unknown collective {collective!r}; known: {', '.join(Collective.values)}."]
    if not isinstance(max_bytes, int) or not MIN_BYTES <= max_bytes <= MAX_BYTES:
        errors["max_bytes"] = [f"The largest size is {MIN_BYTES} B to 16 GiB ({MAX_BYTES} B)."]
    if not isinstance(min_bytes, int) or not MIN_BYTES <= min_bytes <= MAX_BYTES:
        errors["min_bytes"] = [f"The smallest size is {MIN_BYTES} B to 16 GiB ({MAX_BYTES} B)."]
    elif isinstance(max_bytes, int) and min_bytes > max_bytes:
        errors["min_bytes"] = ["The smallest size is above the largest."]
    if not isinstance(iterations, int) or not 1 <= iterations <= MAX_ITERATIONS:
        errors["iterations"] = [f"1 to {MAX_ITERATIONS} timed iterations per size."]
    if not 0 <= cooldown_seconds <= 3600:
        errors["cooldown_seconds"] = ["A cool-down of 0 to 3600 seconds."]
    try:
        selection = job_services.resolve_selection(targets)
    except serializers.ValidationError as error:
        selection, errors = None, errors | error.detail
    transport = transport or default_transport(offered=NcclTests.transports, nodes=selection.nodes if selection else ())
    if transport not in NcclTests.transports:
        errors["transport"] = [f"Benchmarks run over {', '.join(NcclTests.transports)}, not {transport!r}."]
    if errors:
        raise serializers.ValidationError(errors)
    nodes = selection.nodes
    problems = _nodes_errors(nodes, suite=suite, transport=transport)
    if problems:
        raise serializers.ValidationError({"nodes": problems})
    environment = {**nccl_environment(nodes), **(environment or {})}
    tiers = link_error_tiers or link_errors.Tiers()
    parameters = {
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "iterations": iterations,
        "cooldown_seconds": cooldown_seconds,
        "gpus_per_node": _gpus_per_node(nodes),  # one rank per GPU the nodes have: 4 on a GB200 tray, 8 on HGX
        # A sweep reads the NIC error counters around each round and judges their growth by these tiers.
        "link_error_tiers": {"pass_per_million": tiers.pass_per_million, "warn_per_million": tiers.warn_per_million},
        **environment,
    }
    options = {"min_bytes": min_bytes, "max_bytes": max_bytes, "iterations": iterations}
    NcclTests.validate({"collective": collective, **options, **environment})
    with transaction.atomic():
        run = BenchmarkRun.objects.create(
            suite=suite,
            collective=collective,
            parameters=parameters,
            transport=transport,
            target_spec=job_services.with_left_out(targets, selection),
            sku_name=nodes[0].gpu_sku.name,
            fabric=fabric_across(nodes),
            requested_by=requested_by if getattr(requested_by, "is_authenticated", False) else None,
            round_bound=round_bound(len(nodes)) if suite == Suite.SWEEP else 0,
        )
        run.nodes.add(*nodes)
        if queue:
            transaction.on_commit(lambda: enqueue(run))
    return run


def _start_node_run(
    *, suite: str, targets: TargetSpec, transport, duration_seconds, hpl_n, burn_load, requested_by, queue: bool
) -> BenchmarkRun:
    """start_run for HPL-MxP, nvbandwidth and the burn-in soak."""
    errors: dict[str, list[str]] = {}
    duration = BURN_IN_DEFAULT_SECONDS if duration_seconds is None else duration_seconds
    if burn_load not in BurnLoad.values:
        errors["burn_load"] = [f"Unknown load {burn_load!r}; known: {', '.join(BurnLoad.values)}."]
    elif burn_load in DCGM_LEVELS:
        if duration_seconds is not None:
            errors["duration_seconds"] = ["dcgmi diag runs as long as its level does; leave the duration empty."]
        duration = DCGM_NOMINAL_SECONDS[DCGM_LEVELS[burn_load]]
    if (
        suite == Suite.BURN_IN
        and burn_load == BurnLoad.GPU_BURN
        and (
            isinstance(duration, bool)
            or not isinstance(duration, int)
            or not BURN_IN_MIN_SECONDS <= duration <= BURN_IN_MAX_SECONDS
        )
    ):
        errors["duration_seconds"] = [
            f"A soak of {BURN_IN_MIN_SECONDS} to {BURN_IN_MAX_SECONDS} seconds (whole seconds), not {duration!r}."
        ]
    if hpl_n is not None and (
        isinstance(hpl_n, bool) or not isinstance(hpl_n, int) or not HPL_MIN_N <= hpl_n <= HPL_MAX_N
    ):
        errors["hpl_n"] = [f"HPL's matrix order is {HPL_MIN_N} to {HPL_MAX_N}, not {hpl_n!r}."]
    try:
        selection = job_services.resolve_selection(targets)
    except serializers.ValidationError as error:
        selection, errors = None, errors | error.detail
    transport = transport or default_transport(
        offered=NodeBenchmark.transports, nodes=selection.nodes if selection else ()
    )
    if transport not in NodeBenchmark.transports:
        errors["transport"] = [f"This suite runs over {', '.join(NodeBenchmark.transports)}, not {transport!r}."]
    if errors:
        raise serializers.ValidationError(errors)
    nodes = selection.nodes
    problems = _nodes_errors(nodes, suite=suite, transport=transport)
    if problems:
        raise serializers.ValidationError({"nodes": problems})
    gpu_counts = dict(
        Node.objects.filter(pk__in=[node.pk for node in nodes])
        .annotate(count=Count("gpus"))
        .values_list("hostname", "count")
    )
    parameters = {
        "gpus_per_node": max(1, min(gpu_counts.values())),
        "hpl_nb": HPL_NB,
        "hpl_n": hpl_n,
        "duration_seconds": duration,
        "burn_load": burn_load,
        "cases": list(suites.NVBANDWIDTH_CASES),
    }
    skus = sorted({node.gpu_sku.name for node in nodes})
    with transaction.atomic():
        run = BenchmarkRun.objects.create(
            suite=suite,
            parameters=parameters,
            transport=transport,
            target_spec=job_services.with_left_out(targets, selection),
            sku_name=skus[0] if len(skus) == 1 else "mixed",
            fabric=fabric_across(nodes),
            requested_by=requested_by if getattr(requested_by, "is_authenticated", False) else None,
        )
        run.nodes.add(*nodes)
        if queue:
            transaction.on_commit(lambda: enqueue(run))
    return run


def _gpus_per_node(nodes) -> int:
    """The fewest GPUs a node of the set lists in the inventory (8, as before, where none lists any)."""
    rows = Node.objects.filter(pk__in=[node.pk for node in nodes]).annotate(count=Count("gpus"))
    return min((count for count in rows.values_list("count", flat=True) if count), default=8)


def enqueue(run: BenchmarkRun) -> None:
    # By the task's name, not by importing tasks.py (which imports this module); the task id is the run's id.
    current_app.signature(RUN_TASK).apply_async(args=[str(run.public_id)], task_id=str(run.public_id))


# --- executing ------------------------------------------------------------------------------------------------


def execute_run(*, run: BenchmarkRun) -> BenchmarkRun:
    """Run every round of the run here (a worker's task, or `manage.py benchmark run`), then its final status."""
    claimed = BenchmarkRun.objects.filter(pk=run.pk, status=RunStatus.QUEUED).update(
        status=RunStatus.RUNNING, started=timezone.now()
    )
    if not claimed:
        run.refresh_from_db()
        return run
    run.refresh_from_db()
    hosts = list(run.nodes.order_by("hostname").values_list("hostname", flat=True))
    try:
        if run.suite in NODE_SUITES:
            summary = _node_suite(run, hosts)
        elif run.suite == Suite.SWEEP:
            summary = _sweep(run, hosts)
        elif run.suite == Suite.PAIRWISE:
            summary = _pairwise(run, hosts)
        else:
            tests = [PlannedTest(tuple(hosts), Purpose.RUN)] if len(hosts) > 1 else []
            _, results = _round(run, 0, tests, launchers=hosts if not tests else None)
            bad = [result for result in results.values() if result.verdict != Verdict.PASS]
            summary = f"{counted(len(results), 'test')}, {len(bad)} not passing"
        status = RunStatus.SUCCEEDED
        if run.tests.filter(verdict=Verdict.COULD_NOT_RUN).exists() and run.suite == Suite.NCCL:
            status = RunStatus.FAILED
        if run.measurements.filter(verdict=Verdict.COULD_NOT_RUN).exists():
            status = RunStatus.FAILED
    except RunCanceled as canceled:  # what was measured stays; no further round started
        run.refresh_from_db(fields=["canceled_by"])
        who = run.canceled_by.username if run.canceled_by else "system"
        found = f"; {canceled.found}" if canceled.found else ""
        status = RunStatus.CANCELED
        kept = counted(run.tests.count(), "test")
        summary = f"canceled by {who} after {counted(run.rounds.count(), 'round')}{found}; {kept} kept"
    except Exception as error:  # the run ends `error` with the reason; the traceback goes to the log
        logger.exception("benchmark run %s failed", run.public_id)
        status, summary = RunStatus.ERROR, f"error: {error}"[:300]
    BenchmarkRun.objects.filter(pk=run.pk).update(
        status=status,
        summary=summary[:300],
        finished=timezone.now(),
        round_count=run.rounds.count(),
        test_count=run.tests.count() + run.measurements.count(),
    )
    run.refresh_from_db()
    if run.suite in (Suite.SWEEP, Suite.PAIRWISE):
        trays.name_trays(run)  # in an NVLink domain the unit to isolate is a tray
        health_events.record_suspects(run)  # what the sweep named is what is wrong now (apps/health)
    elif run.suite == Suite.BURN_IN:
        health_events.record_burn_in(run)  # a pass validates the node's GPUs, a failure is an event
    _tell_finished(run)
    return run


def _tell_finished(run: BenchmarkRun) -> None:
    # After commit: a listener reads the run's rows as they are stored.
    transaction.on_commit(lambda: signals.run_finished.send(sender=BenchmarkRun, run=run))


class RunCanceled(Exception):
    """The run's cancel was asked for: raised where the next round would start. `found`: what the run had named."""

    def __init__(self, found: str = ""):
        super().__init__(found)
        self.found = found


class RunFinished(Exception):
    """A cancel asked of a run that had already ended."""


def cancel_run(*, run: BenchmarkRun, user=None) -> BenchmarkRun:
    """Cancel a whole run: no further round starts and the current round's job is canceled (apps/jobs ends its
    commands, and its cool-down); the run ends canceled with what was measured kept. A queued run ends at once.
    Asking again while it winds down changes nothing. Raises RunFinished when the run had already ended."""
    asker = user if getattr(user, "is_authenticated", False) else None
    now = timezone.now()
    with transaction.atomic():
        asked = BenchmarkRun.objects.filter(pk=run.pk, status__in=ACTIVE, cancel_requested=False).update(
            cancel_requested=True, canceled_by=asker, updated=now
        )
        if not asked:
            run.refresh_from_db()
            if run.status in ACTIVE:
                return run
            raise RunFinished(f"The run already ended ({run.get_status_display().lower()}).")
        audit.record(AuditAction.CANCEL, obj=run, object_repr=f"{run.suite} benchmark run", user=asker)
        who = asker.username if asker else "system"
        BenchmarkRun.objects.filter(pk=run.pk, status=RunStatus.QUEUED).update(
            status=RunStatus.CANCELED, finished=now, summary=f"canceled by {who} before it started"
        )
    # After the flag is stored: a round created from now on sees it (_start_round), one created before is here.
    for round_ in Round.objects.filter(run=run, job__status__in=JOB_ACTIVE).select_related("job"):
        job_services.cancel_job(job=round_.job, user=asker)
    run.refresh_from_db()
    return run


def _cancel_asked(run: BenchmarkRun) -> bool:
    return BenchmarkRun.objects.filter(pk=run.pk, cancel_requested=True).exists()


def _start_round(run: BenchmarkRun, index: int, *, kind: str, launchers, parameters: dict, cooldown: float = 0.0):
    """Create the round's job and run its shards here; a cancel asked before stops it from starting."""
    if _cancel_asked(run):
        raise RunCanceled()
    job = job_services.create_job(
        kind=kind,
        targets=TargetSpec(nodes=tuple(launchers)),
        parameters=parameters,
        transport=run.transport,
        requested_by=run.requested_by,
        queue=False,
    )
    round_ = Round.objects.create(run=run, index=index, job=job, cooldown_seconds=cooldown)
    if _cancel_asked(run):  # asked while the job was being made: cancel_run may not have seen this round
        run.refresh_from_db(fields=["canceled_by"])
        job_services.cancel_job(job=job, user=run.canceled_by)
    for shard in job.shards.order_by("index"):
        executor.run_shard(job_public_id=str(job.public_id), index=shard.index, worker="benchmark")
    if _cancel_asked(run):
        raise RunCanceled()
    return round_


def abandon_run(*, run: BenchmarkRun, reason: str) -> bool:
    """End a run whose worker was lost (its caller's reaper says so): error, with the reason; False if it had ended."""
    ended = BenchmarkRun.objects.filter(pk=run.pk, status__in=[RunStatus.QUEUED, RunStatus.RUNNING]).update(
        status=RunStatus.ERROR, summary=reason[:300], finished=timezone.now()
    )
    if ended:
        run.refresh_from_db()
        _tell_finished(run)
    return bool(ended)


def last_heartbeat(run: BenchmarkRun):
    """The newest heartbeat of the shards of the run's rounds (None: none beat yet): how recently it was alive."""
    return JobShard.objects.filter(job__benchmark_round__run=run).aggregate(last=Max("heartbeat"))["last"]


def _hpl_order(run: BenchmarkRun, hosts: list[str]) -> int:
    """The run's matrix order, else the largest that fits the set's GPUs (the smallest memory of the SKU set)."""
    if run.parameters.get("hpl_n"):
        return run.parameters["hpl_n"]
    memory = min(Node.objects.filter(hostname__in=hosts).values_list("gpu_sku__hbm_gib", flat=True))
    gpus = run.parameters["gpus_per_node"] * len(hosts)
    return suites.hpl_n(gpus=gpus, memory_gib=memory, nb=run.parameters["hpl_nb"], suite=run.suite)


def _node_round(run: BenchmarkRun, index: int, launchers: list[str], tests: list[dict]) -> None:
    parameters = {key: run.parameters[key] for key in ("gpus_per_node", "hpl_nb", "duration_seconds", "cases")}
    parameters["burn_load"] = run.parameters.get("burn_load", BurnLoad.GPU_BURN)
    if run.suite in HPL_SUITES:
        parameters["hpl_n"] = _hpl_order(run, launchers[:1])
    _start_round(
        run,
        index,
        kind=NodeBenchmark.name,
        launchers=launchers,
        parameters={**parameters, "suite": run.suite, "tests": tests},
    )


def _node_suite(run: BenchmarkRun, hosts: list[str]) -> str:
    """Each node alone in round 1; HPL-MxP then once across the whole set (launched from its first node)."""
    _node_round(
        run,
        0,
        hosts,
        [{"hosts": [host], "hpl_n": _hpl_order(run, [host])} for host in hosts] if run.suite in HPL_SUITES else [],
    )
    if run.suite in HPL_SUITES and len(hosts) > 1:
        _node_round(run, 1, hosts[:1], [{"hosts": hosts, "hpl_n": _hpl_order(run, hosts)}])
    verdicts = list(run.measurements.filter(reference__isnull=False).values_list("verdict", flat=True))
    counts = ", ".join(
        f"{verdicts.count(verdict)} {verdict.replace('_', ' ')}" for verdict in Verdict.values if verdict in verdicts
    )
    return f"{counted(len(hosts), 'node')}, {counted(run.measurements.count(), 'figure')}; judged: {counts or 'none'}"


def _parameters(run: BenchmarkRun, tests: list[PlannedTest], *, sweep: bool) -> dict:
    parameters = run.parameters
    min_bytes, max_bytes = parameters["min_bytes"], parameters["max_bytes"]
    if sweep:  # a sweep compares large messages only; the run's own sizes bound them
        max_bytes = min(max_bytes, SWEEP_SIZES[1])
        min_bytes = min(max(min_bytes, SWEEP_SIZES[0]), max_bytes)
    return {
        "collective": run.collective,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "iterations": parameters.get("iterations", ITERATIONS),  # a run stored before -n was a parameter
        "gpus_per_node": parameters.get("gpus_per_node", 8),  # a GB200 tray has 4: one rank per GPU it has
        "socket_ifname": parameters["socket_ifname"],
        "ib_hca": parameters["ib_hca"],
        "ib_gid_index": parameters["ib_gid_index"],
        "tests": [
            {
                "hosts": list(test.hosts),
                "purpose": test.purpose,
                "subject": test.subject,
                "partner": test.partner,
                "rails": test.purpose == Purpose.CONFIRM,
            }
            for test in tests
        ],
    }


def _round(
    run: BenchmarkRun, index: int, tests: list[PlannedTest], *, launchers=None, sweep=False, cooldown=0.0
) -> tuple[Round, dict[str, BenchmarkTest]]:
    """One round as one job (its cool-down waited inside it: a cancel cuts it short); its shards run here; returns
    the round and its tests by launcher."""
    launchers = launchers or [test.launcher for test in tests]
    parameters = {**_parameters(run, tests, sweep=sweep), "cooldown_seconds": cooldown}
    round_ = _start_round(
        run, index, kind=NcclTests.name, launchers=launchers, parameters=parameters, cooldown=cooldown
    )
    return round_, {test.launcher: test for test in BenchmarkTest.objects.filter(job_id=round_.job_id)}


def _outcome(result: BenchmarkTest | None) -> Outcome:
    if result is None:
        return Outcome(bad=True, verdict=Verdict.COULD_NOT_RUN)
    return Outcome(bad=recording.is_bad(result), busbw_gb_per_s=result.busbw_gb_per_s, verdict=result.verdict)


def _sweep(run: BenchmarkRun, hosts: list[str]) -> str:
    sweep = HalvingSweep(hosts, max_group=MAX_MPI_HOSTS)  # one mpirun's hosts at most: 2,048 nodes start in halves
    cooldown = float(run.parameters.get("cooldown_seconds", DEFAULT_COOLDOWN_SECONDS))
    counters = RoundCounters(run)
    canceled = False
    try:
        while not sweep.done:
            index = sweep.rounds
            tests = sweep.next_round()
            if not tests:
                break
            round_hosts = sorted({host for test in tests for host in test.hosts})
            counters.before(round_hosts)
            round_, results = _round(
                run, index, tests, sweep=True, cooldown=cooldown if sweep.needs_cooldown(tests) else 0.0
            )
            counters.after(round_, round_hosts)
            for test in tests:
                sweep.record(test, _outcome(results.get(test.launcher)))
    except RunCanceled:
        canceled = True  # the suspects already confirmed (and the link errors seen) are still named
    for hostname, evidence in sweep.suspects.items():
        confirm = run.tests.filter(purpose=Purpose.CONFIRM, subject=hostname).order_by("-id").first()
        _name_suspect(run, hostname, confirm, evidence)
    _name_link_error_suspects(run, counters.bad)
    run.parameters = {**run.parameters, "cleared": sweep.cleared, "unresolved": sweep.unresolved}
    run.save(update_fields=["parameters", "updated"])
    named = list(run.suspects.order_by("node__hostname").values_list("node__hostname", flat=True))
    found = f"{counted(len(named), 'suspect')}: {', '.join(named) or 'none'}"
    if canceled:
        raise RunCanceled(found)
    # The rounds are the run's round_count, which the run page and the API give beside the summary (with the bound).
    return f"{found}; {counted(run.tests.count(), 'test')}"


class RoundCounters:
    """The NIC error counters (ethtool -S of each RDMA data NIC) read around each sweep round: a cable that only
    corrupts frames barely slows NCCL, so the bandwidth halving passes it, but its CRC counters grow. A node's
    reading after one round is its reading before the next (one `nic-counters` job per round, plus the first)."""

    def __init__(self, run: BenchmarkRun):
        self.run = run
        tiers = run.parameters.get("link_error_tiers") or {}
        self.tiers = link_errors.Tiers(**tiers) if tiers else link_errors.Tiers()
        self.latest: link_errors.Counters = {}
        self.bad: dict[str, list[dict]] = {}  # node -> its findings at warn or fail, with their round

    def _read(self, hostnames: list[str]):
        return link_errors.read_counters(
            hostnames=hostnames, transport=self.run.transport, requested_by=self.run.requested_by
        )

    def before(self, hostnames: list[str]) -> None:
        unread = [host for host in hostnames if host not in self.latest]
        if unread:
            self.latest |= self._read(unread)[1]

    def after(self, round_: Round, hostnames: list[str]) -> None:
        before = {host: self.latest[host] for host in hostnames if host in self.latest}
        job, after = self._read(hostnames)
        found = [
            {**item, "round": round_.index + 1, "counter_job": str(job.public_id)}
            for item in link_errors.grown(before, after, self.tiers)
        ]
        self.latest |= after
        if found:
            Round.objects.filter(pk=round_.pk).update(link_errors=found)
        for item in found:
            if item["verdict"] != Verdict.PASS:
                self.bad.setdefault(item["node"], []).append(item)


def _link_error_cause(item: dict) -> str:
    grew = ", ".join(f"{counter} +{delta:,}" for counter, delta in item["grew"].items())
    rate = f" ({item['errors_per_million']:g} per million)" if item["errors_per_million"] is not None else ""
    return f"{item['nic']} CRC/symbol errors in round {item['round']}: {grew} over {item['frames']:,} frames{rate}"


def _name_link_error_suspects(run: BenchmarkRun, bad: dict[str, list[dict]]) -> None:
    """Each node whose NIC error counters grew past the tiers over a round: a suspect named by that NIC, its cable
    and switch port (a bandwidth suspect already named keeps its NIC and gains the cause)."""
    if not bad:
        return
    tests = list(run.tests.exclude(busbw_gb_per_s=None).order_by("id"))
    for hostname, findings in sorted(bad.items()):
        worst = max(findings, key=lambda item: (item["verdict"] == Verdict.FAIL, item["errors_per_million"] or 0))
        cause = _link_error_cause(worst)
        existing = Suspect.objects.filter(run=run, node__hostname=hostname).first()
        if existing is not None:
            existing.cause = f"{existing.cause}; {cause}"[:300]
            existing.evidence = {**existing.evidence, "link_errors": findings}
            existing.save(update_fields=["cause", "evidence", "updated"])
            continue
        mine = [test for test in tests if hostname in test.hosts]
        figure = min(mine, key=lambda test: (len(test.hosts), -test.id)) if mine else None
        Suspect.objects.create(
            run=run,
            node=Node.objects.get(hostname=hostname),
            nic=worst["nic"],
            cable=worst["cable"],
            switch=worst["switch"],
            switch_port=worst["switch_port"],
            cause=cause[:300],
            busbw_gb_per_s=figure.busbw_gb_per_s if figure else None,
            expected_gb_per_s=figure.expected_gb_per_s if figure else None,
            verdict=worst["verdict"],
            evidence={"link_errors": findings},
        )


def _pairwise(run: BenchmarkRun, hosts: list[str]) -> str:
    cooldown = float(run.parameters.get("cooldown_seconds", DEFAULT_COOLDOWN_SECONDS))
    index, bad_pairs = 0, set()
    for pairs in pairwise_rounds(hosts):
        tests = [PlannedTest(pair, Purpose.PAIR) for pair in pairs]
        _, results = _round(run, index, tests, sweep=True)
        index += 1
        bad_pairs |= {test.hosts for test in tests if _outcome(results.get(test.launcher)).bad}
    if bad_pairs:  # each bad pair once more after the cool-down, in rounds of disjoint pairs
        still_bad = set()
        remaining = sorted(bad_pairs)
        first_round = True
        while remaining:
            busy, batch, later = set(), [], []
            for pair in remaining:
                if busy & set(pair):
                    later.append(pair)
                else:
                    batch.append(pair)
                    busy |= set(pair)
            tests = [PlannedTest(pair, Purpose.RETEST) for pair in batch]
            _, results = _round(run, index, tests, sweep=True, cooldown=cooldown if first_round else 0.0)
            first_round = False
            index += 1
            still_bad |= {test.hosts for test in tests if _outcome(results.get(test.launcher)).bad}
            remaining = later
        bad_pairs = still_bad
    suspects = pairwise_suspects(bad_pairs, hosts)
    for hostname in suspects:
        _name_suspect(
            run, hostname, None, {"bad_pairs": sorted("+".join(pair) for pair in bad_pairs if hostname in pair)}
        )
    found = f"{counted(len(suspects), 'suspect')}: {', '.join(suspects) or 'none'}"
    return f"{found}; {counted(run.tests.count(), 'test')}"  # its rounds: round_count, as for the sweep


def _name_suspect(run: BenchmarkRun, hostname: str, confirm: BenchmarkTest | None, evidence: dict) -> Suspect:
    """The suspect down to its NIC, cable and switch port: the slow rail, else the first NIC whose link differs."""
    node = Node.objects.prefetch_related(
        Prefetch("nics", queryset=Nic.objects.select_related("cable_as_a__b_switch", "cable_as_b__a_switch"))
    ).get(hostname=hostname)
    findings = confirm.nic_findings if confirm else []
    chosen = next((item for item in findings if item["slow_rail"]), None) or next(
        (item for item in findings if item["problems"]), None
    )
    with_problems = [item for item in findings if item["problems"]]
    causes = sorted(
        {problem for item in with_problems for problem in item["problems"] if not problem.startswith("rail")}
    )
    if chosen is None and findings:
        chosen = findings[0]
    if with_problems and len(with_problems) == len(findings) and not any(item["slow_rail"] for item in findings):
        cause = f"every data NIC: {'; '.join(causes)}"
    elif chosen is not None:
        cause = "; ".join(chosen["problems"]) or "slow across nodes; its links look as the inventory has them"
    else:
        cause = "slow across nodes (no rail test)"
    nic = node.nics.filter(name=chosen["nic"]).first() if chosen else None
    cable, switch, port = cable_end(nic) if nic is not None else ("", "", "")
    figure = confirm or run.tests.filter(subject=hostname).order_by("-id").first()
    suspect, _ = Suspect.objects.update_or_create(
        run=run,
        node=node,
        defaults={
            "nic": nic.name if nic else "",
            "cable": cable,
            "switch": switch,
            "switch_port": port,
            "cause": cause[:300],
            "busbw_gb_per_s": figure.busbw_gb_per_s if figure else None,
            "expected_gb_per_s": figure.expected_gb_per_s if figure else None,
            "verdict": figure.verdict if figure else Verdict.FAIL,
            "evidence": {**evidence, "nic_findings": findings},
        },
    )
    return suspect


# --- baselines ------------------------------------------------------------------------------------------------


def accept_baseline(*, run: BenchmarkRun, user=None) -> int:
    """Make each of the run's tests with a figure the baseline of its scope (collective over its hosts)."""
    if run.status not in (RunStatus.SUCCEEDED, RunStatus.FAILED):
        raise serializers.ValidationError({"run": ["Only a finished run can become a baseline."]})
    accepted = 0
    with transaction.atomic():
        for test in run.tests.filter(busbw_gb_per_s__isnull=False):
            Baseline.objects.update_or_create(
                collective=test.collective,
                hosts_key=test.hosts_key,
                defaults={"test": test, "busbw_gb_per_s": test.busbw_gb_per_s, "accepted_by": user},
            )
            accepted += 1
        for measurement in run.measurements.filter(value__isnull=False):
            MeasurementBaseline.objects.update_or_create(
                suite=measurement.suite,
                case=measurement.case,
                hosts_key=measurement.hosts_key,
                defaults={"measurement": measurement, "value": measurement.value, "accepted_by": user},
            )
            accepted += 1
        BenchmarkRun.objects.filter(pk=run.pk).update(accepted_by=user, accepted_at=timezone.now())
    return accepted


def measurement_rows(run: BenchmarkRun) -> list[dict]:
    """Every figure of a per-node run, in round and host order, as the CLI and the report show them."""
    return [
        {
            "round": item.round.index + 1 if item.round else None,
            "hosts": item.hosts if len(item.hosts) <= 8 else [*item.hosts[:8], f"... {len(item.hosts)} hosts"],
            "host_count": len(item.hosts),  # `hosts` stops at eight names
            "case": item.case,
            "value": item.value,
            "unit": item.unit,
            "expected": item.expected,
            "pct_expected": item.pct_expected,
            "pct_baseline": item.pct_baseline,
            "z_score": item.z_score,
            "verdict": item.verdict,
            "notes": item.evidence.get("notes", [])[1:4],
        }
        for item in run.measurements.select_related("round").order_by("round__index", "launcher", "case")
    ]


def node_suite_report(run: BenchmarkRun) -> dict:
    """`manage.py benchmark run --json` for HPL-MxP, nvbandwidth and burn-in runs."""
    return {
        "run": str(run.public_id),
        "suite": run.suite,
        "status": run.status,
        "summary": run.summary,
        "nodes": run.nodes.count(),
        "rounds": run.round_count,
        "parameters": {key: run.parameters.get(key) for key in ("hpl_n", "hpl_nb", "duration_seconds", "burn_load")},
        "measurements": measurement_rows(run),
    }


def sweep_report(run: BenchmarkRun) -> dict:
    """The JSON `manage.py benchmark run --json` prints and the API's report: suspects, rounds, tests, pairs."""
    tests = list(run.tests.select_related("round").order_by("round__index", "launcher"))
    return {
        "run": str(run.public_id),
        "suite": run.suite,
        "collective": run.collective,
        "status": run.status,
        "summary": run.summary,
        "nodes": run.nodes.count(),
        "rounds": run.round_count,
        "round_bound": run.round_bound or None,
        "tests": run.test_count,
        "suspects": [
            {
                "node": suspect.node.hostname,
                "nic": suspect.nic,
                "cable": suspect.cable,
                "switch": suspect.switch,
                "switch_port": suspect.switch_port,
                "cause": suspect.cause,
                "busbw_gb_per_s": suspect.busbw_gb_per_s,
                "expected_gb_per_s": suspect.expected_gb_per_s,
                "verdict": suspect.verdict,
            }
            for suspect in run.suspects.select_related("node")
        ],
        "pairs": [
            {
                "nodes": test.hosts,
                "busbw_gb_per_s": test.busbw_gb_per_s,
                "verdict": test.verdict,
                "purpose": test.purpose,
            }
            for test in tests
            if len(test.hosts) == 2
        ],
        "results": [
            {
                "round": test.round.index + 1 if test.round else None,
                "purpose": test.purpose,
                "hosts": test.hosts if len(test.hosts) <= 8 else [*test.hosts[:8], f"... {len(test.hosts)} hosts"],
                "busbw_gb_per_s": test.busbw_gb_per_s,
                "expected_gb_per_s": test.expected_gb_per_s,
                "pct_expected": test.pct_expected,
                "pct_baseline": test.pct_baseline,
                "z_score": test.z_score,
                "verdict": test.verdict,
            }
            for test in tests
        ],
        "cleared": run.parameters.get("cleared", []),
        "unresolved": run.parameters.get("unresolved", []),
    }


def failing_pairs_by_node(hostnames: list[str], *, limit: int = 2000) -> dict[str, list[dict]]:
    """hostname -> the multi-node tests it took part in whose latest result for the same hosts failed, and the
    suspects the sweeps named on it (NIC, cable, switch port), newest first. Reads only (for monitoring's SLO blame)."""
    wanted = set(hostnames)
    found: dict[str, list[dict]] = {hostname: [] for hostname in hostnames}
    if not wanted:
        return found
    latest: dict[str, BenchmarkTest] = {}
    recent = BenchmarkTest.objects.exclude(verdict=Verdict.COULD_NOT_RUN).select_related("run")
    recent = recent.order_by("-created", "-id")[:limit]
    for test in recent:
        if len(test.hosts) >= 2 and wanted & set(test.hosts):
            latest.setdefault(test.hosts_key, test)
    for test in latest.values():
        if test.verdict != Verdict.FAIL:
            continue
        entry = {
            "kind": "pair",
            "hosts": list(test.hosts),
            "collective": test.collective,
            "busbw_gb_per_s": test.busbw_gb_per_s,
            "expected_gb_per_s": test.expected_gb_per_s,
            "run": str(test.run.public_id) if test.run_id else "",
            "cable": "",
        }
        for hostname in wanted & set(test.hosts):
            found[hostname].append(entry)
    suspects = Suspect.objects.filter(node__hostname__in=wanted, verdict=Verdict.FAIL).select_related("node", "run")
    for suspect in suspects.order_by("-created")[:limit]:
        found[suspect.node.hostname].append(
            {
                "kind": "suspect",
                "hosts": [suspect.node.hostname],
                "collective": suspect.run.collective,
                "busbw_gb_per_s": suspect.busbw_gb_per_s,
                "expected_gb_per_s": suspect.expected_gb_per_s,
                "run": str(suspect.run.public_id),
                "cable": " ".join(filter(None, (suspect.nic, suspect.cable, suspect.switch, suspect.switch_port))),
            }
        )
    return found
