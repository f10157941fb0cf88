"""Filters shared by the workload pages and the API."""

import django_filters

from apps.core.filters import FilterSet
from apps.workloads.choices import ServiceState, TrainingState
from apps.workloads.models import InferenceService, TrainingJob


class TrainingJobFilterSet(FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=TrainingState.choices)
    node = django_filters.CharFilter(field_name="members__node__hostname", label="Node host name", distinct=True)

    class Meta:
        model = TrainingJob
        fields = ["state", "framework", "launcher", "workload_class", "node"]


class InferenceServiceFilterSet(FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=ServiceState.choices)
    node = django_filters.CharFilter(field_name="nodes__hostname", label="Node host name", distinct=True)

    class Meta:
        model = InferenceService
        fields = ["state", "workload_class", "node"]
