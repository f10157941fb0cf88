"""The diagnosis viewsets, registered on the one API router in portal/urls.py (with their basename: no queryset)."""

from apps.diagnosis.api.views import IncidentViewSet, TriageViewSet

ROUTES = [
    ("diagnosis/triage", TriageViewSet, "diagnosis-triage"),
    ("incidents", IncidentViewSet, "incident"),
]
