"""A sweep's suspects as health events (apps/health): a link measured slower than planned is `link_degraded` on
its cable (or its NIC where no cable is inventoried) with the measured rate; frames corrupted past the tiers are
`link_errors` there; a node slow across nodes with no cause on its links is `nccl_slow` on the node.

A sweep that ends with a node cleared is the validation its links' events wait for (NCCL against known-good
partners, its NIC counters read around each round): their open link events are cleared, the run as the evidence."""

from django.db.models import Prefetch, Q

from apps.benchmarks.choices import RunStatus, Suite, Verdict
from apps.benchmarks.models import BenchmarkRun, Suspect
from apps.health import services as health
from apps.health.choices import ComponentType, Severity, Source
from apps.health.models import HealthEvent
from apps.inventory.models import Cable, Nic

LINK_KINDS = ("link_degraded", "link_errors", "nccl_slow")
SEVERITY = {Verdict.FAIL: Severity.MAJOR, Verdict.COULD_NOT_RUN: Severity.MAJOR, Verdict.WARN: Severity.MINOR}


def record_suspects(run: BenchmarkRun) -> list[HealthEvent]:
    """One event per suspect the run named (folded into the open one where the same fault is known already)."""
    source = Source.SWEEP if run.suite in (Suite.SWEEP, Suite.PAIRWISE) else Source.BENCHMARK
    suspects = run.suspects.select_related("node").prefetch_related(
        Prefetch("node__nics", queryset=Nic.objects.select_related("cable_as_a__b_switch", "cable_as_b__a_switch"))
    )
    events = [_record(run, suspect, source) for suspect in suspects if suspect.verdict != Verdict.PASS]
    _clear_validated(run, suspected={suspect.node_id for suspect in suspects})
    return events


def _clear_validated(run: BenchmarkRun, *, suspected: set[int]) -> None:
    if run.status != RunStatus.SUCCEEDED:
        return  # a canceled or failed run validated nothing
    unresolved = set(run.parameters.get("unresolved") or [])  # nodes the sweep could not judge validate nothing
    validated = run.nodes.exclude(pk__in=suspected).exclude(hostname__in=unresolved)
    # Their links measured at plan: the rates a sweep measured slow before no longer stand.
    for cable in Cable.objects.filter(
        Q(a_nic__node__in=validated) | Q(b_nic__node__in=validated), measured_gbps__isnull=False
    ):
        cable.measured_gbps = None
        cable.save(update_fields=["measured_gbps", "updated"])
    for node in validated:
        health.clear_validated(
            node=node,
            kinds=list(LINK_KINDS),
            validation={"benchmark_run": str(run.public_id), "suite": run.suite},
            reason=f"{run.get_suite_display().split(':')[0]} passed: no slow link or link errors on {node.hostname}",
            at=run.finished,
        )


def nic_cable(nic: Nic) -> Cable | None:
    return getattr(nic, "cable_as_a", None) or getattr(nic, "cable_as_b", None)


def record_link_degraded(
    *, nic: Nic, measured_gbps: float, planned_gbps: int, source: str, severity: str, where: str, evidence: dict, at
) -> HealthEvent:
    """The one home of a link measured below plan: `link_degraded` on the NIC's cable (the NIC where no cable is
    inventoried) with both rates, and the measured rate on the cable, which the topology counts from then on.
    `where` names the link in the summary (host:NIC, and the switch port where known)."""
    cable = nic_cable(nic)
    if cable is not None and cable.measured_gbps != int(measured_gbps):
        cable.measured_gbps = int(measured_gbps)  # the topology counts the link at this rate from now on
        cable.save(update_fields=["measured_gbps", "updated"])
    return health.record_event(
        component=cable or nic,
        source=source,
        kind="link_degraded",
        severity=severity,
        summary=f"{where}: link at {measured_gbps:g} Gb/s (planned {planned_gbps} Gb/s)",
        evidence={**evidence, "measured_gbps": measured_gbps, "planned_gbps": planned_gbps},
        at=at,
    )


def _record(run: BenchmarkRun, suspect: Suspect, source: str) -> HealthEvent:
    nic = next((nic for nic in suspect.node.nics.all() if nic.name == suspect.nic), None)
    cable = nic_cable(nic) if nic is not None else None
    finding = next(
        (item for item in suspect.evidence.get("nic_findings", []) if nic is not None and item["nic"] == nic.name), {}
    )
    measured, planned = finding.get("link_gbps"), finding.get("planned_gbps") or (nic.speed_gbps if nic else None)
    evidence = {
        "benchmark_run": str(run.public_id),
        "busbw_gb_per_s": suspect.busbw_gb_per_s,
        "expected_gb_per_s": suspect.expected_gb_per_s,
        "cause": suspect.cause,
        "switch": suspect.switch,
        "switch_port": suspect.switch_port,
    }
    where = f"{suspect.node.hostname}:{suspect.nic}" + (
        f" → {suspect.switch}:{suspect.switch_port}" if suspect.switch else ""
    )
    severity, at = SEVERITY.get(suspect.verdict, Severity.MAJOR), run.finished or suspect.created
    if nic is not None and measured is not None and planned and measured < planned:
        return record_link_degraded(
            nic=nic,
            measured_gbps=measured,
            planned_gbps=planned,
            source=source,
            severity=severity,
            where=where,
            evidence=evidence,
            at=at,
        )
    if nic is not None and suspect.evidence.get("link_errors"):
        kind, summary = "link_errors", f"{where}: {suspect.cause}"
        evidence["link_errors"] = suspect.evidence["link_errors"][:4]
    else:
        kind, summary = "nccl_slow", f"{suspect.node.hostname} slow across nodes: {suspect.cause}"
    component = cable or nic if kind != "nccl_slow" else suspect.node
    return health.record_event(
        component=component,
        source=source,
        kind=kind,
        severity=severity,
        summary=summary,
        evidence=evidence,
        at=at,
    )


def record_burn_in(run: BenchmarkRun) -> list[HealthEvent]:
    """A burn-in (gpu_burn, or dcgmi diag -r 3/4 under load) is the validation a node's GPU events wait for: a node
    whose every judged figure passed has its open GPU events cleared, and an earlier burn-in's `burn_in_failed`, the
    run as the evidence. A node with a figure that failed is a `burn_in_failed` event on the node, citing the run's
    notes."""
    if run.suite != Suite.BURN_IN or run.status != RunStatus.SUCCEEDED:
        return []
    by_node: dict[str, list] = {}
    for measurement in run.measurements.filter(reference__isnull=False):
        by_node.setdefault(measurement.launcher, []).append(measurement)
    events = []
    nodes = {node.hostname: node for node in run.nodes.all()}
    for hostname, figures in sorted(by_node.items()):
        node = nodes.get(hostname)
        if node is None:
            continue
        failed = [figure for figure in figures if figure.verdict in (Verdict.FAIL, Verdict.COULD_NOT_RUN)]
        load = run.parameters.get("burn_load", "gpu-burn")
        if not failed and all(figure.verdict == Verdict.PASS for figure in figures):
            health.clear_validated(
                node=node,
                component_types=[ComponentType.GPU],
                validation={"benchmark_run": str(run.public_id), "suite": run.suite, "burn_load": load},
                reason=f"burn-in ({load}) passed on {hostname}: every GPU figure within its reference",
                at=run.finished,
            )
            health.clear_validated(  # an earlier burn-in's failure too: this one passed the node
                node=node,
                kinds=["burn_in_failed"],
                validation={"benchmark_run": str(run.public_id), "suite": run.suite, "burn_load": load},
                reason=f"burn-in ({load}) passed on {hostname}: every GPU figure within its reference",
                at=run.finished,
            )
        elif failed:
            notes = [note for figure in failed for note in figure.evidence.get("notes", [])]
            events.append(
                health.record_event(
                    component=node,
                    source=Source.BENCHMARK,
                    kind="burn_in_failed",
                    severity=Severity.MAJOR,
                    summary=f"{hostname}: burn-in ({load}) failed: "
                    + ", ".join(
                        f"{figure.case} {figure.value:g} {figure.unit}"
                        if figure.value is not None
                        else f"{figure.case} not measured"
                        for figure in failed
                    ),  # fmt: skip
                    evidence={"benchmark_run": str(run.public_id), "lines": notes[:4]},
                    at=run.finished,
                )
            )
    return events
