"""Job filters: one set for the job list page and GET /api/jobs/ (the page reads `status` and `kind` the same way)."""

import django_filters

from apps.core.filters import FilterSet
from apps.core.listing import Column
from apps.jobs.choices import JobStatus
from apps.jobs.models import Job

STARTED_BY = (("people", "People"), ("system", "The system"))


class JobFilterSet(FilterSet):
    status = django_filters.MultipleChoiceFilter(choices=JobStatus.choices)
    kind = django_filters.CharFilter()
    started_by = django_filters.ChoiceFilter(
        choices=STARTED_BY,
        empty_label="Anyone",
        method="filter_started_by",
        help_text="people: jobs someone started; system: those schedules and the periodic reads started.",
    )

    class Meta:
        model = Job
        fields = ["status", "kind", "started_by"]

    def filter_started_by(self, queryset, name, value):
        return queryset.filter(requested_by__isnull=value == "system")


def _progress(job) -> str:
    return f"{job.steps_done}/{job.steps_total}"


# The job list's columns (jobs annotated with_progress): what the page sorts by and exports, and GET /api/jobs/'s
# `ordering` fields.
JOB_COLUMNS = (
    Column("job", "Job", lambda job: str(job.public_id), order=None),
    Column("kind", "Kind", lambda job: job.kind),
    Column("status", "Status", lambda job: job.get_status_display()),
    Column("progress", "Progress", _progress, order="steps_done"),
    Column("nodes", "Nodes", lambda job: job.node_count, order="node_count"),
    Column(
        "requested_by",
        "Requested by",
        lambda job: job.requested_by.username if job.requested_by else "system",
        order="requested_by__username",
    ),
    Column("created", "Created", lambda job: job.created.isoformat()),
    Column("summary", "Summary", lambda job: job.summary),
)
