"""The simulator's viewsets, registered on the one API router in portal/urls.py."""

from apps.simulator.api.views import SimFaultViewSet

ROUTES = [("sim/faults", SimFaultViewSet)]
