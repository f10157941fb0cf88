"""The schedulers app's viewsets, registered on the one API router in portal/urls.py."""

from apps.schedulers.api import views

ROUTES: list = [
    ("scheduler-nodes", views.SchedulerNodeViewSet),
    ("slurm-topology", views.TopologyConfViewSet, "slurm-topology"),
    ("compute-domains", views.ComputeDomainViewSet, "compute-domain"),
]
