from django.urls import path

from apps.schedulers import views

urlpatterns = [
    path("topology.conf", views.topology_conf_download, name="scheduler-topology-conf"),
    path("healthcheck", views.healthcheck_download, name="scheduler-healthcheck"),
]
