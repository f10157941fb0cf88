"""Monitoring's viewsets, registered on the one API router in portal/urls.py."""

from apps.monitoring.api import views

ROUTES: list = [
    ("bmcs", views.BmcViewSet),
    ("slos", views.SloViewSet),
    ("health", views.HealthViewSet, "health"),
    ("gpu-hours", views.GpuHoursViewSet, "gpu-hours"),
]
