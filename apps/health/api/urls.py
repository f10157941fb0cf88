"""Health's viewsets, registered on the one API router in portal/urls.py."""

from apps.health.api import views

ROUTES: list = [("health-events", views.HealthEventViewSet), ("reliability", views.ReliabilityViewSet, "reliability")]
