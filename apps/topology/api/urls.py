"""The topology's viewset, registered on the one API router in portal/urls.py (/api/topology/, /api/topology/rules/)."""

from apps.topology.api import views

ROUTES: list = [("topology", views.TopologyViewSet, "topology")]
