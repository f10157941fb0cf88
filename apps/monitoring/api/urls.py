"""Monitoring's viewsets, registered on the one API router in portal/urls.py."""

from apps.inventory.api.views import UUID_PATTERN
from apps.monitoring.api import views

ROUTES: list = [
    ("bmcs", views.BmcViewSet),
    ("slos", views.SloViewSet),
    ("health", views.HealthViewSet, "health"),
    ("gpu-hours", views.GpuHoursViewSet, "gpu-hours"),
    # POST /api/nodes/{id}/bmc-power/: under the node's URL, served here (the inventory may not import monitoring)
    (rf"nodes/(?P<public_id>{UUID_PATTERN})/bmc-power", views.NodeBmcPowerViewSet, "node-bmc-power"),
]
