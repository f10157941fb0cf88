"""A sweep's suspects as health events (apps/health): a link measured slower than planned is `link_degraded` on
its cable (or its NIC where no cable is inventoried) with the measured rate; frames corrupted past the tiers are
`link_errors` there; a node slow across nodes with no cause on its links is `nccl_slow` on the node.

A sweep that ends with a node cleared is the validation its links' events wait for (NCCL against known-good
partners, its NIC counters read around each round): their open link events are cleared, the run as the evidence."""

from django.db.models import Prefetch, Q

from apps.benchmarks.choices import RunStatus, Suite, Verdict
from apps.benchmarks.models import BenchmarkRun, Suspect
from apps.health import services as health
from apps.health.choices import Severity, Source
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


def _record(run: BenchmarkRun, suspect: Suspect, source: str) -> HealthEvent:
    nic = next((nic for nic in suspect.node.nics.all() if nic.name == suspect.nic), None)
    cable = (getattr(nic, "cable_as_a", None) or getattr(nic, "cable_as_b", None)) if nic is not None else None
    finding = next(
        (item for item in suspect.evidence.get("nic_findings", []) if nic is not None and item["nic"] == nic.name), {}
    )
    measured, planned = finding.get("link_gbps"), finding.get("planned_gbps") or (nic.speed_gbps if nic else None)
    evidence = {
        "benchmark_run": str(run.public_id),
        "busbw_gbps": suspect.busbw_gbps,
        "expected_gbps": suspect.expected_gbps,
        "cause": suspect.cause,
        "switch": suspect.switch,
        "switch_port": suspect.switch_port,
    }
    where = f"{suspect.node.hostname}:{suspect.nic}" + (
        f" → {suspect.switch}:{suspect.switch_port}" if suspect.switch else ""
    )
    if nic is not None and measured is not None and planned and measured < planned:
        kind, summary = "link_degraded", f"{where}: link at {measured:g} Gb/s (planned {planned} Gb/s)"
        evidence |= {"measured_gbps": measured, "planned_gbps": planned}
        if cable is not None and cable.measured_gbps != int(measured):
            cable.measured_gbps = int(measured)  # the topology counts the link at this rate from now on
            cable.save(update_fields=["measured_gbps", "updated"])
    elif nic is not None and suspect.evidence.get("link_errors"):
        kind, summary = "link_errors", f"{where}: {suspect.cause}"
        evidence["link_errors"] = suspect.evidence["link_errors"][:4]
    else:
        kind, summary = "nccl_slow", f"{suspect.node.hostname} slow across nodes: {suspect.cause}"
    component = cable or nic if kind != "nccl_slow" else suspect.node
    return health.record_event(
        component=component,
        source=source,
        kind=kind,
        severity=SEVERITY.get(suspect.verdict, Severity.MAJOR),
        summary=summary,
        evidence=evidence,
        at=run.finished or suspect.created,
    )
