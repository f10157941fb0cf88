"""Topology API, mounted at /api/topology/ by portal/urls.py."""

from django.urls import path

from apps.topology.api import views

urlpatterns = [
    path("", views.TopologyView.as_view(), name="api-topology"),
    path("rules/", views.TopologyRulesView.as_view(), name="api-topology-rules"),
]
