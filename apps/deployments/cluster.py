"""Phase 5, cluster acceptance: once every node of a deployment is verified, its nodes are tested together —
multi-node NCCL all_reduce, the sweep that finds a slow node or link (pairwise for two or three nodes), HPL-MxP —
each a benchmark run started through apps.benchmarks' services (deployments reads benchmarks, never writes its
models). Each check's verdict, figure, suspects (NIC, cable, switch port) and suggestions are deployments' own rows.

recording.settle_state asks `phase_state` when a run's job ends and `schedule`s the phase; the task
`rackpilot.deployments.cluster_acceptance` runs `execute`, then settles the deployment. Nothing here imports the
recording module or the services, so both can stand on it."""

import logging
from datetime import timedelta

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from rest_framework import serializers

from apps.benchmarks import link_errors
from apps.benchmarks import services as benchmarks
from apps.benchmarks.choices import Suite
from apps.core import units
from apps.core.audit import in_words
from apps.core.text import counted
from apps.deployments import criteria, health_events
from apps.deployments.choices import (
    CLUSTER_PENDING,
    OUTCOME_COLOURS,
    OUTCOME_RANK,
    VERIFIED_OUTCOMES,
    ClusterCheck,
    ClusterCheckStatus,
    Outcome,
    Problem,
    SuggestionState,
)
from apps.deployments.models import ClusterAcceptanceCheck, Deployment, DeploymentRun, Suggestion
from apps.jobs.services import TargetSpec

logger = logging.getLogger(__name__)

TASK = "rackpilot.deployments.cluster_acceptance"
CHECKS = (ClusterCheck.NCCL, ClusterCheck.SWEEP, ClusterCheck.HPL)
NCCL_MAX_BYTES = 4 * 2**30  # the reference applies from 1 GiB; 8 B to 4 GiB draws the whole curve
# What phase_state answers besides an outcome.
OFF, TO_SCHEDULE, PENDING = "off", "to_schedule", "pending"


def enabled(deployment: Deployment) -> bool:
    """The plan asks for it (default: on for two nodes or more) and there are two nodes or more to test together."""
    wanted = (deployment.options.get("acceptance") or {}).get("cluster")
    count = deployment.nodes.count()
    return count >= 2 and (wanted if isinstance(wanted, bool) else True)


def latest_checks(deployment: Deployment) -> list[ClusterAcceptanceCheck]:
    """The checks of the latest attempt of the latest run that scheduled the phase."""
    newest = deployment.cluster_checks.order_by("-run__number", "-attempt").values_list("run_id", "attempt").first()
    if newest is None:
        return []
    run_id, attempt = newest
    rows = deployment.cluster_checks.filter(run_id=run_id, attempt=attempt).select_related("run", "benchmark_run")
    return sorted(rows, key=lambda check: CHECKS.index(ClusterCheck(check.check_name)))


def worst(outcomes) -> str:
    return max(outcomes, key=lambda outcome: OUTCOME_RANK[Outcome(outcome)])


def phase_state(deployment: Deployment, run: DeploymentRun) -> str:
    """For a run whose nodes are all verified: OFF, TO_SCHEDULE (this run has not scheduled it), PENDING, or the
    worst outcome of its latest attempt."""
    if not enabled(deployment):
        return OFF
    checks = [check for check in latest_checks(deployment) if check.run_id == run.pk]
    if not checks:
        return TO_SCHEDULE
    if any(check.status in CLUSTER_PENDING for check in checks):
        return PENDING
    return worst(check.outcome or Outcome.COULD_NOT_RUN for check in checks)


def schedule(deployment: Deployment, run: DeploymentRun) -> list[ClusterAcceptanceCheck]:
    """Queue a new attempt of the phase for this run; its task starts when the transaction commits."""
    last = deployment.cluster_checks.filter(run=run).order_by("-attempt").values_list("attempt", flat=True).first()
    attempt = (last or 0) + 1
    with transaction.atomic():
        checks = [
            ClusterAcceptanceCheck.objects.create(deployment=deployment, run=run, attempt=attempt, check_name=name)
            for name in CHECKS
        ]
        transaction.on_commit(lambda: enqueue(deployment))
    return checks


def enqueue(deployment: Deployment) -> None:
    # By the task's name, not by importing tasks.py (which imports this module).
    current_app.signature(TASK).apply_async(args=[str(deployment.public_id)])


# --- running ----------------------------------------------------------------------------------------------------------


def execute(deployment: Deployment) -> list[ClusterAcceptanceCheck]:
    """Run each queued check of the latest attempt here (the task), one after the other; each claims its row first,
    so a redelivered task runs nothing twice."""
    hostnames = list(deployment.nodes.order_by("hostname").values_list("hostname", flat=True))
    for check in latest_checks(deployment):
        claimed = ClusterAcceptanceCheck.objects.filter(pk=check.pk, status=ClusterCheckStatus.QUEUED).update(
            status=ClusterCheckStatus.RUNNING, started=timezone.now(), updated=timezone.now()
        )
        if not claimed:
            continue
        check.refresh_from_db()
        try:
            result = _run_check(deployment, check, hostnames)
        except Exception as error:  # one check's failure must not leave the phase running for ever
            logger.exception("cluster acceptance %s of %s failed", check.check_name, deployment.name)
            result = _could_not_run(f"internal error: {error!r}")
        _record(deployment, check, result)
    return latest_checks(deployment)


def _suite(check_name: str, hostnames: list[str]) -> str:
    if check_name == ClusterCheck.NCCL:
        return Suite.NCCL
    if check_name == ClusterCheck.HPL:
        return Suite.HPL_MXP
    return Suite.SWEEP if len(hostnames) >= benchmarks.SWEEP_MIN_NODES else Suite.PAIRWISE


def _run_check(deployment: Deployment, check: ClusterAcceptanceCheck, hostnames: list[str]) -> dict:
    suite = _suite(check.check_name, hostnames)
    nccl = deployment.options.get("nccl") or {}
    environment = {"socket_ifname": nccl["socket_ifname"]} if nccl.get("socket_ifname") else {}
    cooldown = _cooldown(deployment)
    extra = {"max_bytes": NCCL_MAX_BYTES} if suite == Suite.NCCL else {}
    if suite in (Suite.NCCL, Suite.SWEEP, Suite.PAIRWISE):
        extra.update(environment=environment, cooldown_seconds=cooldown)
    try:
        run = benchmarks.start_run(
            suite=suite,
            targets=TargetSpec(nodes=tuple(hostnames)),
            transport=deployment.transport or None,  # None: the suite's default (nodeexec.transports)
            requested_by=check.run.started_by,
            queue=False,
            **extra,
        )
    except serializers.ValidationError as error:
        return _could_not_run(f"the benchmark was refused: {_flatten(error.detail)}")
    ClusterAcceptanceCheck.objects.filter(pk=check.pk).update(benchmark_run=run, updated=timezone.now())
    counted = check.check_name == ClusterCheck.NCCL  # the NIC error counters are read around the NCCL test

    def counters():
        read = link_errors.read_counters(hostnames=hostnames, transport=run.transport, requested_by=run.requested_by)
        ClusterAcceptanceCheck.objects.filter(pk=check.pk).update(updated=timezone.now())  # a sign of life
        return read

    before = counters() if counted else None
    run = benchmarks.execute_run(run=run)
    judge = {ClusterCheck.NCCL: _judge_nccl, ClusterCheck.SWEEP: _judge_sweep, ClusterCheck.HPL: _judge_hpl}
    result = judge[ClusterCheck(check.check_name)](run)
    if counted:
        _judge_link_errors(result, before, counters(), _link_error_tiers(deployment), hostnames)
        health_events.record_link_errors(deployment=deployment, run=run, items=result["details"]["link_errors"])
    result["benchmark_run"] = run
    result["details"] = {"suite": suite, "benchmark_status": run.status, **result.get("details", {})}
    return result


def _could_not_run(reason: str) -> dict:
    return {
        "outcome": Outcome.COULD_NOT_RUN,
        "value": "could not run",
        "criterion": "the benchmark runs",
        "summary": reason[:300],
        "details": {"reason": reason},
        "suggestions": [],
    }


def _flatten(detail) -> str:
    if isinstance(detail, dict):
        return "; ".join(f"{key}: {_flatten(value)}" for key, value in detail.items())
    if isinstance(detail, list):
        return " ".join(_flatten(item) for item in detail)
    return str(detail)


def _judge_nccl(run) -> dict:
    report = benchmarks.sweep_report(run)
    tests = run.tests.order_by("id")
    test = tests.first()
    if test is None or test.busbw_gb_per_s is None:
        return _could_not_run(f"multi-node NCCL gave no figure ({run.summary or run.status})")
    expected = test.expected_gb_per_s
    criterion = (
        f"all_reduce bus bandwidth across {len(test.hosts)} nodes at ≥ {test.warn_gb_per_s:g} GB/s for pass, "
        f"≥ {test.fail_gb_per_s:g} for warn (reference {expected:g} GB/s, {run.sku_name}, {run.fabric})"
        if expected is not None
        else f"no reference for {run.sku_name} over {run.fabric}: any figure passes"
    )
    value = f"{test.busbw_gb_per_s:.1f} GB/s" + (
        f" ({100 * test.busbw_gb_per_s / expected:.0f} % of {expected:g})" if expected else ""
    )
    suggestions = []
    if test.verdict not in VERIFIED_OUTCOMES:
        suggestions.append(
            {
                "hostname": test.launcher,
                "problem": Problem.CLUSTER_NCCL_SLOW,
                "subject": "",
                "title": f"Multi-node NCCL at {value} across {len(test.hosts)} nodes",
                "cause": "The nodes pass alone but not together: a slow NIC, cable or switch port, MTU or PFC "
                "somewhere on the path between them. The sweep of this phase names the node and link when one "
                "stands out.",
                "next_check": "Read the sweep's suspects below; else run the pairwise suite on the set.",
                "evidence": report["summary"],
            }
        )
    return {
        "outcome": test.verdict,
        "value": value[:120],
        "criterion": criterion[:300],
        "summary": (
            f"{len(test.hosts)} nodes, {test.busbw_gb_per_s:.1f} GB/s busbw at {units.size(test.size_bytes or 0)}"
        ),
        "details": {
            "busbw_gb_per_s": test.busbw_gb_per_s,
            "expected_gb_per_s": expected,
            "warn_gb_per_s": test.warn_gb_per_s,
            "fail_gb_per_s": test.fail_gb_per_s,
            "series": [
                {"size_bytes": row.get("size_bytes") or row.get("size"), "busbw_gb_per_s": row.get("busbw_gb_per_s")}
                for row in _oop_rows(test.series)
            ],
        },
        "suggestions": suggestions,
    }


def _link_error_tiers(deployment: Deployment) -> link_errors.Tiers:
    criterion = deployment.criteria.get("nic_link_errors") or criteria.DEFAULTS["nic_link_errors"]
    return link_errors.Tiers(criterion["threshold"], criterion.get("warn_threshold"))


def _judge_link_errors(
    result: dict, before: tuple, after: tuple, tiers: link_errors.Tiers, hostnames: list[str]
) -> None:
    """Add to the NCCL check's result the NICs whose CRC/symbol error counters grew over the test: each one at warn
    or fail makes the check at least that bad, with a suggestion naming the NIC, its cable and switch port."""
    (before_job, before_counters), (after_job, after_counters) = before, after
    found = link_errors.grown(before_counters, after_counters, tiers)
    unread = link_errors.unread(before_counters, after_counters, hostnames)
    details = result.setdefault("details", {})
    details["link_errors"] = found[:64]
    details["counters_unread"] = unread[:64]
    details["counter_jobs"] = [str(before_job.public_id), str(after_job.public_id)]
    bad = [item for item in found if item["verdict"] != Outcome.PASS]  # a warn is told too: the link is failing
    limits = f"≤ {tiers.pass_per_million:g} pass" + (
        f", ≤ {tiers.warn_per_million:g} warn" if tiers.warn_per_million is not None else ""
    )
    result["criterion"] = (
        f"{result['criterion']}; no NIC's CRC/symbol errors grow over the test ({limits} per million frames)"
    )
    if unread:
        result["summary"] = f"{result['summary']}; NIC counters not read on {', '.join(unread[:4])}"
    if not bad:
        return
    result["outcome"] = worst([result["outcome"], *(item["verdict"] for item in bad)])
    names = ", ".join(f"{item['node']} {item['nic']}" for item in bad[:3])
    result["value"] = f"{result['value']}; link errors: {names}"
    result["summary"] = f"{result['summary']}; CRC/symbol errors grew on {counted(len(bad), 'NIC')}: {names}"
    for item in bad:
        where = f" to {item['switch']}:{item['switch_port']}" if item["switch"] else ""
        grew = ", ".join(f"{counter} +{delta:,}" for counter, delta in item["grew"].items())
        rate = f"{item['errors_per_million']:g} per million frames" if item["errors_per_million"] is not None else ""
        result["suggestions"].append(
            {
                "hostname": item["node"],
                "problem": Problem.LINK_ERRORS,
                "subject": item["nic"],
                "title": f"Link errors on {item['node']} {item['nic']}"
                + (f": cable {item['cable']}" if item["cable"] else "")
                + where,
                "cause": f"Over the multi-node NCCL test its error counters grew ({grew}; {item['frames']:,} frames "
                f"received{', ' + rate if rate else ''}): the cable, a transceiver or the switch port corrupts "
                "frames. RoCE resends them, so the bandwidth barely shows it.",
                "next_check": f"`ethtool -S {item['nic']}` on {item['node']} twice under traffic (rx_crc_errors_phy, "
                f"rx_symbol_err_phy), and the error counters of {item['switch'] or 'the switch'} port "
                f"{item['switch_port'] or '?'}.",
                "fix": f"Clean or reseat the transceivers of cable {item['cable'] or '(see the inventory)'}, else "
                "replace it or move it to another port; then run cluster acceptance again.",
                "evidence": in_words(item)[:8000],
            }
        )


def _hosts_in_words(row: dict) -> str:
    count = row.get("host_count", len(row["hosts"]))  # the rows list eight names at most
    return row["hosts"][0] if count == 1 else f"all {count} nodes together"


def _hpl_lowest(row: dict) -> str:
    figure = f"{row['value']:,.0f} {row['unit']} per GPU"
    share = f", {row['value'] / row['expected']:.0%} of the {row['expected']:,.0f} expected" if row["expected"] else ""
    return f"lowest {figure}{share} ({_hosts_in_words(row)})"


def _oop_rows(series: list) -> list[dict]:
    """Each row's size and out-of-place bus bandwidth, whatever the stored row calls them."""
    rows = []
    for row in series or []:
        size = row.get("size_bytes", row.get("size"))
        busbw = row.get("busbw_gb_per_s", row.get("oop_busbw", row.get("busbw")))
        if isinstance(busbw, dict):
            busbw = busbw.get("out_of_place")
        if size is not None and isinstance(busbw, int | float):
            rows.append({"size_bytes": size, "busbw_gb_per_s": busbw})
    return rows


def _judge_sweep(run) -> dict:
    report = benchmarks.sweep_report(run)
    if run.status == "error" or not report["results"]:
        return _could_not_run(f"the sweep did not finish ({run.summary or run.status})")
    suspects = report["suspects"]
    suggestions = [
        {
            "hostname": suspect["node"],
            "problem": Problem.SLOW_LINK,
            "subject": suspect["nic"],
            "title": f"Slow link on {suspect['node']}"
            + (f" {suspect['nic']}" if suspect["nic"] else "")
            + (f": cable {suspect['cable']}" if suspect["cable"] else "")
            + (f" to {suspect['switch']}:{suspect['switch_port']}" if suspect["switch"] else ""),
            "cause": f"The NCCL sweep named it, and confirmed it against a different known-good partner after the "
            f"cool-down: {suspect['cause']}"
            + (
                f" ({suspect['busbw_gb_per_s']:.1f} GB/s, expected {suspect['expected_gb_per_s']:g})"
                if suspect["busbw_gb_per_s"] is not None and suspect["expected_gb_per_s"]
                else ""
            ),
            "next_check": f"Check the link on both ends: `ethtool {suspect['nic'] or 'IF'}` on {suspect['node']} "
            f"(speed, errors), and the counters of {suspect['switch'] or 'the switch'} port "
            f"{suspect['switch_port'] or '?'}.",
            "fix": f"Reseat or replace cable {suspect['cable'] or '(see the inventory)'}, or move it to another port; "
            "then run cluster acceptance again.",
            "evidence": f"{report['summary']}; suspect {suspect}"[:8000],
        }
        for suspect in suspects
    ]
    if suspects:
        outcome = Outcome.FAIL
        value = f"{counted(len(suspects), 'suspect')}: " + ", ".join(
            f"{s['node']} {s['nic']} ({s['cable'] or 'no cable'}, {s['switch']}:{s['switch_port']})" for s in suspects
        )
    elif report["unresolved"]:
        outcome, value = Outcome.WARN, f"unresolved: {', '.join(report['unresolved'])}"
    else:
        outcome, value = Outcome.PASS, "no slow node or link"
    heat = {}
    for pair in report["pairs"]:
        if pair["busbw_gb_per_s"] is not None:
            heat["+".join(sorted(pair["nodes"]))] = pair["busbw_gb_per_s"]
    return {
        "outcome": outcome,
        "value": value[:120],
        "criterion": f"no node slow across nodes: each group of the {run.suite} judged against the reference and "
        "the set's median (robust z-score), confirmed against a known-good partner after a cool-down",
        "summary": report["summary"],
        "details": {
            "suspects": suspects,
            "rounds": report["rounds"],
            "round_bound": report["round_bound"],
            "tests": report["tests"],
            "cleared": report["cleared"],
            "unresolved": report["unresolved"],
            "pairs": [
                {"nodes": pair["nodes"], "busbw_gb_per_s": pair["busbw_gb_per_s"], "verdict": pair["verdict"]}
                for pair in report["pairs"]
            ][:64],
        },
        "suggestions": suggestions,
    }


def _judge_hpl(run) -> dict:
    report = benchmarks.node_suite_report(run)
    figures = [row for row in report["measurements"] if row["value"] is not None and row["case"].startswith("lu")]
    judged = [row for row in report["measurements"] if row["expected"] is not None]
    if not figures or any(row["verdict"] == Outcome.COULD_NOT_RUN for row in report["measurements"]):
        return _could_not_run(f"HPL-MxP gave no figure on every node ({run.summary or run.status})")
    outcome = worst([row["verdict"] for row in judged] or [Outcome.PASS])
    # The whole set's figure per GPU has its own, lower expectation (the multi-node model): "lowest" is the lowest
    # share of its own reference, not the lowest number, which would always be the set's.
    lowest = (
        min(judged, key=lambda row: row["value"] / row["expected"])
        if judged
        else min(figures, key=lambda row: row["value"])
    )
    node_expected = next((row["expected"] for row in judged if len(row["hosts"]) == 1), None)
    set_expected = next((row["expected"] for row in judged if len(row["hosts"]) > 1), None)
    suggestions = [
        {
            "hostname": row["hosts"][0],
            "problem": Problem.HPL_LOW,
            "subject": "" if len(row["hosts"]) == 1 else f"{len(row['hosts'])} nodes",
            "title": f"HPL-MxP at {row['value']:,.0f} {row['unit']} on {', '.join(row['hosts'][:3])}",
            "cause": f"Below the reference's pass tier ({row['expected']:,.0f} expected): a power cap, capped clocks, "
            "thermal slowdown or a slow GPU sets the pace of the solve. " + " ".join(row["notes"]),
            "next_check": "Run the burn-in soak on the node (clocks, temperature and clocks-event reasons) and "
            "nvidia-smi -q -d PERFORMANCE,POWER.",
            "evidence": in_words(row)[:8000],
        }
        for row in judged
        if row["verdict"] not in VERIFIED_OUTCOMES and len(row["hosts"]) == 1
    ]
    return {
        "outcome": outcome,
        "value": _hpl_lowest(lowest)[:120],
        "criterion": (
            f"LU GFLOPS per GPU of every node against the {run.sku_name} reference ({node_expected:,.0f} expected)"
            + (
                f" and of the whole set against the multi-node expectation ({set_expected:,.0f})"
                if set_expected
                else ""
            )
            if node_expected
            else f"no HPL-MxP reference for {run.sku_name}: any figure passes"
        )[:300],
        "summary": report["summary"],
        "details": {
            "measurements": [
                {key: row[key] for key in ("round", "hosts", "case", "value", "unit", "expected", "verdict")}
                for row in figures
            ][:300],
        },
        "suggestions": suggestions,
    }


def _record(deployment: Deployment, check: ClusterAcceptanceCheck, result: dict) -> None:
    """Store the check's verdict and its suggestions; suggestions of earlier attempts of the check are settled."""
    now = timezone.now()
    with transaction.atomic():
        Suggestion.objects.filter(
            deployment=deployment,
            step=check.check_name,
            state__in=[SuggestionState.OPEN, SuggestionState.APPROVED],
        ).update(state=SuggestionState.RESOLVED, updated=now)
        ClusterAcceptanceCheck.objects.filter(pk=check.pk).update(
            status=ClusterCheckStatus.DONE,
            outcome=result["outcome"],
            value=result["value"][:120],
            criterion=result["criterion"][:300],
            summary=result["summary"][:300],
            details=result.get("details", {}),
            finished=now,
            updated=now,
        )
        Suggestion.objects.bulk_create(
            Suggestion(
                deployment=deployment,
                run=check.run,
                node=deployment.nodes.filter(hostname=item["hostname"]).first(),
                step=check.check_name,
                **item,
            )
            for item in result.get("suggestions", [])
        )


# --- worker loss --------------------------------------------------------------------------------------------------


def reap_lost_checks(*, now=None) -> int:
    """The phase's safety net for a lost worker (beat's `rackpilot.deployments.settle`), as the jobs engine's reaper
    does for shards (docs/jobs.md, "Worker loss"). A RUNNING check shows no sign of life when neither its row nor
    a shard of its benchmark's rounds has moved for RACKPILOT_JOB_STALE_SECONDS plus the run's cool-down: it is
    re-queued (its benchmark run ended as lost) up to RACKPILOT_JOB_WORKER_LOSS_RERUNS times, then recorded as
    could-not-run with the reason. An attempt with queued checks and none running that has not moved for
    RACKPILOT_JOB_REQUEUE_WAIT_SECONDS lost its task's message: it is sent again. Either way the task runs what is
    queued and settles the deployment. Every change is a conditional update. Returns how many checks it touched."""
    now = now or timezone.now()
    reaped = 0
    running = ClusterAcceptanceCheck.objects.filter(status=ClusterCheckStatus.RUNNING).select_related(
        "deployment", "run", "benchmark_run"
    )
    for check in running:
        last = _last_sign_of_life(check)
        allowance = settings.RACKPILOT_JOB_STALE_SECONDS + _cooldown(check.deployment)
        if last > now - timedelta(seconds=allowance):
            continue
        lost = f"worker lost: the {check.get_check_name_display()} check stopped (last sign of life {last.isoformat()})"
        if _requeue_lost(check, lost, now=now) or _fail_lost(check, lost, now=now):
            reaped += 1
            transaction.on_commit(lambda deployment=check.deployment: enqueue(deployment))
    waited = now - timedelta(seconds=settings.RACKPILOT_JOB_REQUEUE_WAIT_SECONDS)
    for deployment in Deployment.objects.filter(cluster_checks__status=ClusterCheckStatus.QUEUED).distinct():
        checks = latest_checks(deployment)
        queued = [check for check in checks if check.status == ClusterCheckStatus.QUEUED]
        if not queued or any(check.status == ClusterCheckStatus.RUNNING for check in checks):
            continue
        if max(check.updated for check in checks) >= waited:
            continue
        # Touch the queued rows (conditionally), so that a second reaper, or this one next time, waits again.
        if ClusterAcceptanceCheck.objects.filter(pk=queued[0].pk, updated=queued[0].updated).update(updated=now):
            logger.warning("cluster acceptance of %s: no worker took its task; sending it again", deployment.name)
            reaped += len(queued)
            transaction.on_commit(lambda deployment=deployment: enqueue(deployment))
    return reaped


def _last_sign_of_life(check: ClusterAcceptanceCheck):
    moments = [check.updated, check.started]
    if check.benchmark_run is not None:
        moments.append(benchmarks.last_heartbeat(check.benchmark_run))
    return max(moment for moment in moments if moment is not None)


def _cooldown(deployment: Deployment) -> float:
    return float((deployment.criteria.get("nccl_busbw") or {}).get("cooldown_seconds", 5))


def _requeue_lost(check: ClusterAcceptanceCheck, lost: str, *, now) -> bool:
    requeued = (check.details or {}).get("requeued", 0)
    if requeued >= settings.RACKPILOT_JOB_WORKER_LOSS_RERUNS:
        return False
    with transaction.atomic():
        if not ClusterAcceptanceCheck.objects.filter(
            pk=check.pk, status=ClusterCheckStatus.RUNNING, updated=check.updated
        ).update(
            status=ClusterCheckStatus.QUEUED,
            started=None,
            benchmark_run=None,
            details={"requeued": requeued + 1, "lost": lost},
            updated=now,
        ):
            return False
        if check.benchmark_run is not None:
            benchmarks.abandon_run(run=check.benchmark_run, reason=lost)
    logger.warning("cluster acceptance of %s: %s; re-queued (%d)", check.deployment.name, lost, requeued + 1)
    return True


def _fail_lost(check: ClusterAcceptanceCheck, lost: str, *, now) -> bool:
    reruns = settings.RACKPILOT_JOB_WORKER_LOSS_RERUNS
    reason = f"{lost}; re-queued {counted(reruns, 'time')} already" if reruns else lost
    with transaction.atomic():
        if not ClusterAcceptanceCheck.objects.filter(
            pk=check.pk, status=ClusterCheckStatus.RUNNING, updated=check.updated
        ).update(updated=now):
            return False
        if check.benchmark_run is not None:
            benchmarks.abandon_run(run=check.benchmark_run, reason=lost)
        _record(check.deployment, check, _could_not_run(reason))
    logger.warning("cluster acceptance of %s: %s; recorded as could not run", check.deployment.name, lost)
    return True


# --- reading ----------------------------------------------------------------------------------------------------------


def panel(deployment: Deployment) -> dict:
    """What the run panel and the report show of the phase."""
    checks = latest_checks(deployment)
    pending = any(check.status in CLUSTER_PENDING for check in checks)
    done = [check.outcome for check in checks if check.status == ClusterCheckStatus.DONE and check.outcome]
    outcome = worst(done) if done and not pending and len(done) == len(checks) else ""
    return {
        "enabled": enabled(deployment),
        "checks": checks,
        "pending": pending,
        "outcome": outcome,
        "colour": OUTCOME_COLOURS[Outcome(outcome)] if outcome else "grey",
        "verified": sum(outcome in VERIFIED_OUTCOMES for outcome in done),
        "total": len(CHECKS),
        "charts": {check.check_name: chart(check) for check in checks if check.status == ClusterCheckStatus.DONE},
    }


def as_json(deployment: Deployment) -> dict:
    data = panel(deployment)
    return {
        "enabled": data["enabled"],
        "outcome": data["outcome"] or ("pending" if data["pending"] else "not run"),
        "checks": [
            {
                "check": check.check_name,
                "label": check.get_check_name_display(),
                "attempt": check.attempt,
                "run": check.run.number,
                "status": check.status,
                "outcome": check.outcome,
                "value": check.value,
                "criterion": check.criterion,
                "summary": check.summary,
                "benchmark_run": str(check.benchmark_run.public_id) if check.benchmark_run else None,
                "details": check.details,
            }
            for check in data["checks"]
        ],
    }


COLOURS = {"pass": "#2e7d32", "warn": "#f9a825", "fail": "#c62828", "could_not_run": "#757575"}


def chart(check: ClusterAcceptanceCheck) -> str:
    """A small inline SVG of the check's figures (it survives the standalone, signed report without scripts):
    NCCL busbw per message size against the reference, the sweep's two-node tests, HPL-MxP per node."""
    details = check.details or {}
    if check.check_name == ClusterCheck.NCCL:
        rows = [row for row in details.get("series", []) if row.get("busbw_gb_per_s") is not None]
        bars = [(_size(row["size_bytes"]), row["busbw_gb_per_s"], "#1565c0") for row in rows[-12:]]
        return _bars(bars, reference=details.get("expected_gb_per_s"), unit="GB/s", title="busbw by message size")
    if check.check_name == ClusterCheck.SWEEP:
        bars = [
            ("+".join(pair["nodes"]), pair["busbw_gb_per_s"], COLOURS.get(pair["verdict"], "#757575"))
            for pair in details.get("pairs", [])
            if pair.get("busbw_gb_per_s") is not None
        ]
        return _bars(bars[:24], reference=None, unit="GB/s", title="two-node tests")
    rows = details.get("measurements", [])[:32]
    bars = [
        (
            row["hosts"][0] if len(row["hosts"]) == 1 else f"all {len(row['hosts'])}",
            row["value"] / 1000,
            COLOURS.get(row["verdict"], "#757575"),
        )
        for row in rows
    ]
    # Each bar against its own expectation: a node's is the SKU's reference, the whole set's the multi-node model's.
    expected = [row["expected"] / 1000 if row.get("expected") else None for row in rows]
    return _bars(bars, reference=None, unit="TFLOPS/GPU", title="LU per GPU", expected=expected)


def _size(size) -> str:
    size = int(size or 0)
    for unit, factor in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if size >= factor:
            return f"{size / factor:g}{unit}"
    return f"{size}B"


def _bars(
    bars: list[tuple[str, float, str]],
    *,
    reference: float | None,
    unit: str,
    title: str,
    expected: list[float | None] | None = None,
) -> str:
    """Horizontal bars, with one dashed reference line for all of them, or a mark on each bar at its own `expected`."""
    if not bars:
        return ""
    width, row_height, label_width = 520, 16, 170
    expected = expected or []
    top = max([value for _, value, _ in bars] + [reference or 0] + [mark or 0 for mark in expected]) or 1
    scale = (width - label_width - 70) / top
    height = row_height * len(bars) + 24
    items = format_html_join(
        "",
        '<text x="{}" y="{}" font-size="10" text-anchor="end">{}</text>'
        '<rect x="{}" y="{}" width="{}" height="{}" fill="{}"/>'
        '<text x="{}" y="{}" font-size="10">{}</text>',
        (
            (
                label_width - 4,
                20 + index * row_height + 10,
                label[:32],
                label_width,
                20 + index * row_height,
                f"{max(value, 0) * scale:.1f}",
                row_height - 4,
                colour,
                label_width + max(value, 0) * scale + 3,
                20 + index * row_height + 10,
                f"{value:,.1f}",
            )
            for index, (label, value, colour) in enumerate(bars)
        ),
    )
    line = (
        format_html(
            '<line x1="{0}" x2="{0}" y1="14" y2="{1}" stroke="#000" stroke-dasharray="4 3"/>'
            '<text x="{0}" y="11" font-size="10" text-anchor="middle">reference {2}</text>',
            f"{label_width + reference * scale:.1f}",
            height,
            f"{reference:,.1f}",
        )
        if reference
        else ""
    )
    marks = format_html_join(
        "",
        '<line class="expected" x1="{0}" x2="{0}" y1="{1}" y2="{2}" stroke="#000" stroke-width="2">'
        "<title>expected {3}</title></line>",
        (
            (
                f"{label_width + mark * scale:.1f}",
                18 + index * row_height,
                18 + (index + 1) * row_height,
                f"{mark:,.1f}",
            )
            for index, mark in enumerate(expected)
            if mark
        ),
    )
    legend = format_html('<text x="{}" y="11" font-size="10">| expected</text>', width - 70) if marks else ""
    return format_html(
        '<svg class="cluster-chart" xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" role="img" '
        'aria-label="{}"><text x="0" y="11" font-size="11" font-weight="bold">{} ({})</text>{}{}{}{}</svg>',
        width,
        height,
        title,
        title,
        unit,
        items,
        line,
        marks,
        legend,
    )
