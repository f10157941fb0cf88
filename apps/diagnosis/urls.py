from django.urls import path

from apps.diagnosis import views

urlpatterns = [
    path("triage/", views.triage, name="diagnosis-triage"),
]
