from django.urls import path

from apps.monitoring import views

urlpatterns = [
    path("", views.cluster_telemetry, name="telemetry"),
    path("nodes/<uuid:public_id>/", views.node_telemetry, name="node-telemetry"),
    path("nodes/<uuid:public_id>/bmc/", views.node_bmc_edit, name="node-bmc-edit"),
    path("switch-trays/<uuid:public_id>/bmc/", views.switch_tray_bmc_edit, name="switch-tray-bmc-edit"),
    path("nodes/<uuid:public_id>/bmc/power/", views.node_bmc_power, name="node-bmc-power"),
    path("slos/", views.slo_list, name="slo-list"),
    path("slos/rules.yml", views.slo_rules, name="slo-rules"),
    path("gpu-hours/", views.gpu_hours, name="gpu-hours"),
    path("grafana.zip", views.grafana_bundle, name="grafana-bundle"),
    path("services/<uuid:public_id>/validate/", views.service_validate, name="service-validate"),
]
