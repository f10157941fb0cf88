"""Job filters: one set for the job list page and GET /api/jobs/ (the page reads `status` and `kind` the same way)."""

import django_filters

from apps.core.filters import FilterSet
from apps.core.listing import Column
from apps.jobs.choices import JobStatus
from apps.jobs.models import Job


class JobFilterSet(FilterSet):
    status = django_filters.MultipleChoiceFilter(choices=JobStatus.choices)
    kind = django_filters.CharFilter()

    class Meta:
        model = Job
        fields = ["status", "kind"]


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
