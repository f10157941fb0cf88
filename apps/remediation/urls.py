from django.urls import path

from apps.remediation import views

urlpatterns = [path("", views.remediation, name="remediation")]
