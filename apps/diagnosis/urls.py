from django.urls import path

from apps.diagnosis import views

urlpatterns = [
    path("triage/", views.triage, name="diagnosis-triage"),
    path("incidents/", views.incident_list, name="incident-list"),
    path("incidents/open/", views.incident_open, name="incident-open"),
    path("incidents/rehearse/", views.incident_rehearse, name="incident-rehearse"),
    path("incidents/<uuid:public_id>/", views.incident_detail, name="incident-detail"),
    path("incidents/<uuid:public_id>/live/", views.incident_live, name="incident-live"),
    path("incidents/<uuid:public_id>/runbook/", views.incident_runbook, name="incident-runbook"),
    path(
        "incidents/<uuid:public_id>/remediations/<uuid:remediation_id>/approve/",
        views.remediation_approve,
        name="remediation-approve",
    ),
]
