import django_filters

from apps.core.filters import FilterSet
from apps.inventory.filters import RefFilter, node_ref
from apps.inventory.models import Rack
from apps.remediation.choices import Action, Mode, Outcome
from apps.remediation.models import MaintenanceWindow, RemediationDecision


class RemediationDecisionFilterSet(FilterSet):
    node = node_ref()
    policy = django_filters.UUIDFilter(field_name="policy__public_id", help_text="The policy's id.")
    mode = django_filters.ChoiceFilter(choices=Mode.choices)
    action = django_filters.MultipleChoiceFilter(choices=Action.choices)
    outcome = django_filters.MultipleChoiceFilter(choices=Outcome.choices)

    class Meta:
        model = RemediationDecision
        fields = ["node", "policy", "mode", "action", "outcome"]


class MaintenanceWindowFilterSet(FilterSet):
    rack = RefFilter(field_name="rack", queryset=Rack.objects.all(), natural_key="name", label="Rack name or public id")
    node = node_ref()

    class Meta:
        model = MaintenanceWindow
        fields = ["rack", "node"]
