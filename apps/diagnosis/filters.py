import django_filters
from django.db.models import Q

from apps.diagnosis.choices import Cause, IncidentState
from apps.diagnosis.models import Incident


class IncidentFilterSet(django_filters.FilterSet):
    state = django_filters.ChoiceFilter(choices=IncidentState.choices)
    cause = django_filters.ChoiceFilter(choices=Cause.choices)
    node = django_filters.CharFilter(method="filter_node", help_text="Incidents touching this host name.")

    class Meta:
        model = Incident
        fields = ["state", "cause", "node"]

    def filter_node(self, queryset, name, value):
        return queryset.filter(Q(node__hostname=value) | Q(suspect_nodes__hostname=value)).distinct()
