from django.urls import path

from apps.monitoring import views

urlpatterns = [
    path("", views.cluster_telemetry, name="telemetry"),
    path("nodes/<uuid:public_id>/", views.node_telemetry, name="node-telemetry"),
    path("nodes/<uuid:public_id>/bmc/", views.node_bmc_edit, name="node-bmc-edit"),
    path("slos/", views.slo_list, name="slo-list"),
    path("slos/rules.yml", views.slo_rules, name="slo-rules"),
    path("gpu-hours/", views.gpu_hours, name="gpu-hours"),
    path("grafana.zip", views.grafana_bundle, name="grafana-bundle"),
    path("services/<uuid:public_id>/validate/", views.service_validate, name="service-validate"),
]

# Cost and energy policies: portal/urls.py mounts these at /policies/.
policy_urlpatterns = [
    path("", views.policy_list, name="policy-list"),
    path("<uuid:public_id>/", views.policy_detail, name="policy-detail"),
    path("<uuid:public_id>/<slug:step>/", views.policy_step, name="policy-step"),
    path("<uuid:public_id>/actions/<uuid:action_id>/<slug:name>/", views.policy_artefact, name="policy-artefact"),
]
