"""Rackpilot's own /metrics, for Prometheus: jobs, events, verdicts, BMC polls and training jobs' progress.

Every figure is counted from the database at scrape time, not kept in process memory. The counters are durable
facts (a job that ended, an event written, a verdict given, a BMC read), so they stay monotonic across restarts of
any process, and every ASGI process or host answers the same numbers however many job workers there are on however
many hosts. prometheus_client's multiprocess mode would give that only for processes sharing one host and one
directory, and would lose what a worker had counted when that directory is cleaned. The price is a few GROUP BY
queries per scrape (bench/metrics_scrape.py).

The families are all named here (promtool checks them, tests/monitoring/test_metrics.py). The figures come from
sources: functions returning Samples, registered with `register_source`. This app registers its own (jobs, events,
BMC polls); the wiring (portal/metrics.py) registers the feature apps' (benchmark and deployment verdicts), since
feature apps do not import each other. Open incidents and fleet health join the same way, as sources of new
families declared below.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.db.models import Count, Sum
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from apps.jobs.choices import JOB_ACTIVE, JOB_TERMINAL
from apps.jobs.models import Job
from apps.monitoring.models import Bmc
from apps.workloads import services as workloads
from apps.workloads.models import TrainingJob


@dataclass(frozen=True)
class Family:
    type: str  # counter | gauge
    documentation: str
    labels: tuple[str, ...] = ()


# Every family /metrics exposes. Label values are bounded: job kinds and statuses, verdicts, poll results.
FAMILIES = {
    "rackpilot_jobs_active": Family("gauge", "Jobs queued or running, by kind and status.", ("kind", "status")),
    "rackpilot_jobs_finished_total": Family(
        "counter", "Jobs that ended, by kind and final status.", ("kind", "status")
    ),
    "rackpilot_job_events_total": Family("counter", "Job events written (live output, progress, findings)."),
    "rackpilot_verdicts_total": Family(
        "counter",
        "Verdicts given by checks, by where they come from (benchmarks, deployments) and verdict.",
        ("source", "verdict"),
    ),
    "rackpilot_bmc_polls_total": Family("counter", "Reads of node BMCs, by result.", ("result",)),
    "rackpilot_bmcs": Family("gauge", "Node BMCs Rackpilot reads, by the result of their last read.", ("last_result",)),
    # Per active training job, from the step lines its `training-progress` reads stored
    # (apps/monitoring/kinds/training_progress.py).
    # The label is `training_job`, not `job`: Prometheus gives every scraped series its own `job` label (the scrape
    # job), which would rename ours to `exported_job`. Its values are bounded by the training jobs running.
    "rackpilot_training_step": Family(
        "gauge", "The newest step a training job's log shows, by training job.", ("training_job",)
    ),
    "rackpilot_training_loss": Family(
        "gauge", "The loss a training job's newest step line printed, by training job.", ("training_job",)
    ),
    "rackpilot_training_samples_per_second": Family(
        "gauge",
        "Samples per second of a training job's newest step line, by training job.",
        ("training_job",),
    ),
    "rackpilot_training_step_timestamp_seconds": Family(
        "gauge",
        "When a training job's newest step line was written (Unix time): a stalled run stops advancing it.",
        ("training_job",),
    ),
    # Later: rackpilot_incidents_open{severity} (diagnosis), rackpilot_nodes{health} (fleet health).
}


@dataclass(frozen=True)
class Sample:
    family: str
    value: float
    labels: dict[str, str] = field(default_factory=dict)


Source = Callable[[], Iterable[Sample]]
SOURCES: list[Source] = []


def register_source(source: Source) -> Source:
    if source not in SOURCES:
        SOURCES.append(source)
    return source


@register_source
def job_samples() -> Iterable[Sample]:
    rows = Job.objects.order_by().values("kind", "status").annotate(count=Count("pk"), events=Sum("last_seq"))
    events = 0
    for row in rows:
        events += row["events"] or 0
        labels = {"kind": row["kind"], "status": row["status"]}
        if row["status"] in JOB_ACTIVE:
            yield Sample("rackpilot_jobs_active", row["count"], labels)
        elif row["status"] in JOB_TERMINAL:
            yield Sample("rackpilot_jobs_finished_total", row["count"], labels)
    yield Sample("rackpilot_job_events_total", events)


@register_source
def bmc_samples() -> Iterable[Sample]:
    totals = Bmc.objects.order_by().aggregate(
        ok=Sum("polls_ok"), partial=Sum("polls_partial"), failed=Sum("polls_failed")
    )
    for result, value in totals.items():
        yield Sample("rackpilot_bmc_polls_total", value or 0, {"result": result})
    for row in Bmc.objects.order_by().values("last_result").annotate(count=Count("pk")):
        yield Sample("rackpilot_bmcs", row["count"], {"last_result": row["last_result"] or "never"})


@register_source
def training_samples() -> Iterable[Sample]:
    jobs = {job.pk: job.name for job in TrainingJob.objects.active().only("pk", "name")}
    for job_id, point in workloads.latest_progress(jobs=list(jobs)).items():
        labels = {"training_job": jobs[job_id]}
        yield Sample("rackpilot_training_step", point.step, labels)
        yield Sample("rackpilot_training_step_timestamp_seconds", point.time.timestamp(), labels)
        if point.loss is not None:
            yield Sample("rackpilot_training_loss", point.loss, labels)
        if point.samples_per_second is not None:
            yield Sample("rackpilot_training_samples_per_second", point.samples_per_second, labels)


class RackpilotCollector(Collector):
    """Builds the families from the registered sources at each scrape."""

    def collect(self) -> Iterable[Metric]:
        families = {}
        for name, family in FAMILIES.items():
            kind = CounterMetricFamily if family.type == "counter" else GaugeMetricFamily
            families[name] = kind(name, family.documentation, labels=family.labels)
        for source in SOURCES:
            for sample in source():
                family = FAMILIES[sample.family]
                families[sample.family].add_metric([sample.labels[label] for label in family.labels], sample.value)
        return families.values()


def registry() -> CollectorRegistry:
    """A registry holding only Rackpilot's figures (no process or platform metrics of whichever process answered)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RackpilotCollector())
    return registry
