from django.urls import path

from apps.workloads import views

urlpatterns = [
    path("", views.workload_list, name="workload-list"),
    path("training/<uuid:public_id>/", views.training_detail, name="training-detail"),
    path("services/<uuid:public_id>/", views.service_detail, name="service-detail"),
]
