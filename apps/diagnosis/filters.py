import django_filters
from django.db.models import Q

from apps.core.filters import FilterSet
from apps.core.listing import Column
from apps.diagnosis.choices import Cause, IncidentState
from apps.diagnosis.models import Incident


class IncidentFilterSet(FilterSet):
    state = django_filters.ChoiceFilter(choices=IncidentState.choices)
    cause = django_filters.ChoiceFilter(choices=Cause.choices)
    node = django_filters.CharFilter(method="filter_node", help_text="Incidents touching this host name.")

    class Meta:
        model = Incident
        fields = ["state", "cause", "node"]

    def filter_node(self, queryset, name, value):
        return queryset.filter(Q(node__hostname=value) | Q(suspect_nodes__hostname=value)).distinct()


def _about(incident) -> str:
    return " ".join(
        part for part in (str(incident.training_job or ""), incident.node.hostname if incident.node else "") if part
    )


# The incident list's columns, and GET /api/incidents/'s `ordering` fields.
INCIDENT_COLUMNS = (
    Column("title", "Incident", lambda incident: incident.title),
    Column("state", "State", lambda incident: incident.get_state_display()),
    Column("about", "About", _about, order="node__hostname"),
    Column("cause", "Cause", lambda incident: incident.get_cause_display()),
    Column("opened", "Opened", lambda incident: incident.created.isoformat(), order="created"),
    Column(
        "escalated",
        "Recurrence of",
        lambda incident: incident.recurrence_of.title if incident.recurrence_of else "",
        order="recurrence_of__title",
    ),
)
