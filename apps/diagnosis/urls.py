from django.urls import path
from django.views.generic import RedirectView

from apps.diagnosis import views

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="incident-list"), name="diagnosis"),  # the README's address
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
