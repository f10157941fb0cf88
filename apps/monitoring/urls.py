from django.urls import path

from apps.monitoring import views

urlpatterns = [
    path("nodes/<uuid:public_id>/bmc/", views.node_bmc_edit, name="node-bmc-edit"),
]
