from django.urls import path

from apps.deployments import views

urlpatterns = [
    path("", views.deployment_list, name="deployment-list"),
    path("new/", views.deployment_new, name="deployment-new"),
    path("<uuid:public_id>/", views.deployment_detail, name="deployment-detail"),
    path("<uuid:public_id>/wizard/<str:stage>/", views.deployment_wizard, name="deployment-wizard"),
    path("<uuid:public_id>/artefacts/<str:name>/", views.artefact_download, name="deployment-artefact"),
    path("<uuid:public_id>/cells/<str:hostname>/<str:step>/", views.cell_verdicts, name="deployment-cell"),
    path("<uuid:public_id>/suggestions/", views.suggestion_list, name="deployment-suggestions"),
    path("<uuid:public_id>/resume/", views.deployment_resume, name="deployment-resume"),
    path("<uuid:public_id>/cluster/", views.cluster_panel, name="deployment-cluster"),
    path("<uuid:public_id>/cluster/rerun/", views.cluster_rerun, name="deployment-cluster-rerun"),
    path("<uuid:public_id>/report/", views.deployment_report, name="deployment-report"),
    path("<uuid:public_id>/report/download/", views.report_download, name="deployment-report-download"),
    path("nodes/<uuid:public_id>/scheduler/", views.node_scheduler_action, name="node-scheduler-action"),
    path("nodes/<uuid:public_id>/reboot/", views.node_reboot, name="node-reboot"),
    path("suggestions/<uuid:public_id>/<str:decision>/", views.suggestion_decide, name="deployment-suggestion-decide"),
]
