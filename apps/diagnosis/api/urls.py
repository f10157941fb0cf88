"""The diagnosis viewsets, registered on the one API router in portal/urls.py (with their basename: no queryset)."""

from apps.diagnosis.api.views import TriageViewSet

ROUTES = [("diagnosis/triage", TriageViewSet, "diagnosis-triage")]
