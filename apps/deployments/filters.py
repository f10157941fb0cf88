"""Deployment filters: one set per list, shared by the deployment list page and the API's viewsets."""

import django_filters

from apps.deployments.choices import DeploymentState
from apps.deployments.models import AcceptanceCriterion, Deployment, Suggestion


class DeploymentFilterSet(django_filters.FilterSet):
    state = django_filters.ChoiceFilter(choices=DeploymentState.choices)

    class Meta:
        model = Deployment
        fields = ["name", "state"]


class SuggestionFilterSet(django_filters.FilterSet):
    class Meta:
        model = Suggestion
        fields = ["state", "hostname", "step", "problem", "deployment__public_id"]


class AcceptanceCriterionFilterSet(django_filters.FilterSet):
    class Meta:
        model = AcceptanceCriterion
        fields = ["check_name", "sku__name"]
