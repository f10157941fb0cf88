"""Job filters: one set for the job list page and GET /api/jobs/ (the page reads `status` and `kind` the same way)."""

import django_filters

from apps.jobs.choices import JobStatus
from apps.jobs.models import Job


class JobFilterSet(django_filters.FilterSet):
    status = django_filters.MultipleChoiceFilter(choices=JobStatus.choices)
    kind = django_filters.CharFilter()

    class Meta:
        model = Job
        fields = ["status", "kind"]
