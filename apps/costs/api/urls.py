"""Cost policies' viewsets, registered on the one API router in portal/urls.py (the paths they had under
apps/monitoring)."""

from apps.costs.api import views

ROUTES: list = [
    ("cost-policies", views.CostPolicyViewSet),
    ("policy-actions", views.PolicyActionViewSet),
]
