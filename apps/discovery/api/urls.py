"""The discovery viewsets, registered on the one API router in portal/urls.py."""

from apps.discovery.api.views import DifferenceViewSet, NodeFactsViewSet

ROUTES = [("discovery/differences", DifferenceViewSet), ("discovery/facts", NodeFactsViewSet)]
