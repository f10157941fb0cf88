"""Filters shared by the discovery API and pages."""

import uuid

from django.db.models import Q
from django_filters import rest_framework as filters

from apps.discovery.choices import DifferenceState, ObjectType
from apps.discovery.models import Difference, NodeFacts


def _node_query(prefix: str, value: str) -> Q:
    """A node by host name or public id."""
    try:
        return Q(**{f"{prefix}public_id": uuid.UUID(value)})
    except ValueError:
        return Q(**{f"{prefix}hostname": value})


class DifferenceFilterSet(filters.FilterSet):
    job = filters.UUIDFilter(field_name="job__public_id", help_text="Public id of the discovery job.")
    node = filters.CharFilter(method="filter_node", help_text="Host name or public id of the node.")
    state = filters.MultipleChoiceFilter(choices=DifferenceState.choices)
    object_type = filters.MultipleChoiceFilter(choices=ObjectType.choices)

    class Meta:
        model = Difference
        fields = ["job", "node", "state", "object_type"]

    def filter_node(self, queryset, name, value):
        return queryset.filter(_node_query("node__", value))


class NodeFactsFilterSet(filters.FilterSet):
    job = filters.UUIDFilter(field_name="job__public_id", help_text="Public id of the discovery job.")
    node = filters.CharFilter(method="filter_node", help_text="Host name or public id of the node.")

    class Meta:
        model = NodeFacts
        fields = ["job", "node"]

    def filter_node(self, queryset, name, value):
        return queryset.filter(_node_query("node__", value))
