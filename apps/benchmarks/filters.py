"""Filters shared by the benchmarks page and GET /api/benchmarks/, and GET /api/benchmark-timelines/'s."""

import json

import django_filters

from apps.benchmarks.choices import Collective, RunStatus, Suite
from apps.benchmarks.models import BenchmarkRun, TimelineAnalysis
from apps.core.filters import FilterSet
from apps.core.listing import Column


class BenchmarkRunFilterSet(FilterSet):
    suite = django_filters.ChoiceFilter(choices=Suite.choices)
    status = django_filters.ChoiceFilter(choices=RunStatus.choices)
    collective = django_filters.ChoiceFilter(choices=Collective.choices)
    node = django_filters.CharFilter(field_name="nodes__hostname", distinct=True)

    class Meta:
        model = BenchmarkRun
        fields = ["suite", "status", "collective", "node"]


class TimelineAnalysisFilterSet(FilterSet):
    job = django_filters.UUIDFilter(
        field_name="job__public_id", help_text="The job that stored it (a profile's or large upload's 202 names it)."
    )
    training_job = django_filters.CharFilter(field_name="training_job__name", help_text="The training job's name.")

    class Meta:
        model = TimelineAnalysis
        fields = ["job", "training_job"]


NCCL_SUITES = {"nccl", "nccl-sweep", "nccl-pairwise"}  # the suites whose runs name a collective


# The benchmark runs list's columns, and GET /api/benchmarks/'s `ordering` fields.
BENCHMARK_RUN_COLUMNS = (
    Column("started", "Started", lambda run: run.created.isoformat(), order="created"),
    Column("suite", "Suite", lambda run: run.suite),
    Column("collective", "Collective", lambda run: run.collective if run.suite in NCCL_SUITES else ""),
    Column("status", "Status", lambda run: run.get_status_display()),
    Column("nodes", "Nodes", lambda run: json.dumps(run.target_spec, sort_keys=True), order=None),
    Column("rounds", "Rounds", lambda run: run.round_count, order="round_count"),
    Column("tests", "Tests", lambda run: run.test_count, order="test_count"),
    Column("summary", "Summary", lambda run: run.summary),
    Column(
        "by", "By", lambda run: run.requested_by.username if run.requested_by else "", order="requested_by__username"
    ),
)
