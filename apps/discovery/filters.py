"""Filters shared by the discovery API and pages."""

import uuid

from django.db.models import Q
from django_filters import rest_framework as filters

from apps.core.filters import FilterSet
from apps.core.listing import Column
from apps.discovery.choices import DifferenceState, ObjectType
from apps.discovery.models import Difference, NodeFacts
from apps.jobs.choices import JobStatus
from apps.jobs.models import Job


def _node_query(prefix: str, value: str) -> Q:
    """A node by host name or public id."""
    try:
        return Q(**{f"{prefix}public_id": uuid.UUID(value)})
    except ValueError:
        return Q(**{f"{prefix}hostname": value})


class DifferenceFilterSet(FilterSet):
    job = filters.UUIDFilter(field_name="job__public_id", help_text="Public id of the discovery job.")
    node = filters.CharFilter(method="filter_node", help_text="Host name or public id of the node.")
    state = filters.MultipleChoiceFilter(choices=DifferenceState.choices)
    object_type = filters.MultipleChoiceFilter(choices=ObjectType.choices)

    class Meta:
        model = Difference
        fields = ["job", "node", "state", "object_type"]

    def filter_node(self, queryset, name, value):
        return queryset.filter(_node_query("node__", value))


class NodeFactsFilterSet(FilterSet):
    job = filters.UUIDFilter(field_name="job__public_id", help_text="Public id of the discovery job.")
    node = filters.CharFilter(method="filter_node", help_text="Host name or public id of the node.")

    class Meta:
        model = NodeFacts
        fields = ["job", "node"]

    def filter_node(self, queryset, name, value):
        return queryset.filter(_node_query("node__", value))


class DiscoveryRunFilterSet(FilterSet):
    """The discovery page's runs (jobs of the discover kind), by status; GET /api/jobs/?kind=discover lists them too."""

    status = filters.MultipleChoiceFilter(choices=JobStatus.choices)

    class Meta:
        model = Job
        fields = ["status"]


# The discovery page's runs (services.discovery_jobs: with their open and filled difference counts).
DISCOVERY_RUN_COLUMNS = (
    Column("started", "Started", lambda job: job.created.isoformat(), order="created"),
    Column("status", "Status", lambda job: job.get_status_display()),
    Column("nodes", "Nodes", lambda job: job.node_count, order="node_count"),
    Column("transport", "Transport", lambda job: job.transport),
    Column("open", "Open differences", lambda job: job.open_count, order="open_count"),
    Column("filled", "Filled in", lambda job: job.filled_count, order="filled_count"),
    Column(
        "by", "By", lambda job: job.requested_by.username if job.requested_by else "", order="requested_by__username"
    ),
    Column("job", "Job", lambda job: str(job.public_id), order=None),
)
