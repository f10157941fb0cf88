from django.urls import path

from apps.remediation import views

urlpatterns = [
    path("", views.remediation, name="remediation"),
    path("repairs/", views.repair_list, name="repair-list"),
    path("repairs/<uuid:public_id>/", views.repair_detail, name="repair-detail"),
    path(
        "repairs/<uuid:public_id>/<slug:action>/",
        views.repair_action,
        name="repair-action",
    ),
]
