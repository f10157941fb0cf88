from django.urls import path

from apps.topology import views

urlpatterns = [
    path("", views.TopologyView.as_view(), name="topology"),
]
