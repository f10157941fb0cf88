"""Remediation's viewsets, registered on the one API router in portal/urls.py."""

from apps.remediation.api import views

ROUTES: list = [
    ("remediation-policies", views.RemediationPolicyViewSet),
    ("remediation-decisions", views.RemediationDecisionViewSet),
    ("repairs", views.RepairViewSet),
    ("maintenance-windows", views.MaintenanceWindowViewSet),
]
