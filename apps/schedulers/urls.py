from django.urls import path

from apps.schedulers import views

urlpatterns = [
    path("topology.conf", views.topology_conf_download, name="scheduler-topology-conf"),
    path("topology.yaml", views.topology_yaml_download, name="scheduler-topology-yaml"),
    path("compute-domains/<uuid:public_id>.yaml", views.compute_domain_download, name="scheduler-compute-domain"),
    path("healthcheck", views.healthcheck_download, name="scheduler-healthcheck"),
]
