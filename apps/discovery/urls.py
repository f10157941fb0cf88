from django.urls import path

from apps.discovery import views

urlpatterns = [
    path("", views.job_list, name="discovery"),
    path("start/", views.start, name="discovery-start"),
    path("jobs/<uuid:public_id>/", views.job_detail, name="discovery-job"),
    path("jobs/<uuid:public_id>/nodes/<str:hostname>/accept-all/", views.accept_node, name="discovery-accept-node"),
    path("differences/<uuid:public_id>/accept/", views.accept, name="discovery-accept"),
    path("differences/<uuid:public_id>/dismiss/", views.dismiss, name="discovery-dismiss"),
    path("differences/<uuid:public_id>/fix-node/", views.fix_node, name="discovery-fix-node"),
]
