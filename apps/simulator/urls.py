from django.urls import path

from apps.simulator import views

urlpatterns = [
    path("", views.fault_list, name="simulator"),
    path("faults/", views.fault_inject, name="sim-fault-inject"),
    path("faults/<uuid:public_id>/clear/", views.fault_clear, name="sim-fault-clear"),
    path("nodes/<str:hostname>/clear/", views.node_clear, name="sim-node-clear"),
    path("nodes/<str:hostname>/forget/", views.node_forget, name="sim-node-forget"),
]
