import django_filters

from apps.core.filters import FilterSet
from apps.health.choices import ComponentType, Severity, Source
from apps.health.models import HealthEvent
from apps.inventory.filters import node_ref


class HealthEventFilterSet(FilterSet):
    severity = django_filters.MultipleChoiceFilter(choices=Severity.choices)
    source = django_filters.MultipleChoiceFilter(choices=Source.choices)
    component_type = django_filters.MultipleChoiceFilter(choices=ComponentType.choices)
    node = node_ref()
    kind = django_filters.CharFilter(max_length=48, help_text="The event's kind, exactly (e.g. xid79).")
    open = django_filters.BooleanFilter(
        field_name="cleared_at", lookup_expr="isnull", help_text="true: open events only; false: cleared ones only."
    )

    class Meta:
        model = HealthEvent
        fields = ["severity", "source", "component_type", "node", "kind", "open"]
