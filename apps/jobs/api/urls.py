"""The jobs viewsets, registered on the one API router in portal/urls.py."""

from apps.jobs.api.views import JobViewSet

ROUTES = [("jobs", JobViewSet)]
