"""The deployments viewsets, registered on the one API router in portal/urls.py."""

from apps.deployments.api.views import AcceptanceCriterionViewSet, DeploymentViewSet, SuggestionViewSet

ROUTES = [
    ("deployments/suggestions", SuggestionViewSet),
    ("deployments", DeploymentViewSet),
    ("acceptance-criteria", AcceptanceCriterionViewSet),
]
