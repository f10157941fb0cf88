"""Filters of the simulator's fault list, shared by the API and the simulator page."""

from django_filters import rest_framework as filters

from apps.core.filters import FilterSet
from apps.simulator.faults.kinds import CHOICES as FAULT_KIND_CHOICES
from apps.simulator.models import SimFault


class SimFaultFilterSet(FilterSet):
    node = filters.CharFilter(field_name="node__hostname", help_text="Host name of the simulated node.")
    kind = filters.MultipleChoiceFilter(choices=FAULT_KIND_CHOICES)

    class Meta:
        model = SimFault
        fields = ["node", "kind"]
