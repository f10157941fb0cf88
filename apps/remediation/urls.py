from django.urls import path

from apps.remediation import views

urlpatterns = [
    path("", views.remediation, name="remediation"),
    path("racks/<uuid:public_id>/power-off-trays/", views.power_off_trays, name="remediation-power-off-trays"),
    path("racks/<uuid:public_id>/power-on/", views.power_on, name="remediation-power-on"),
    path("backtest/", views.backtest_policy, name="remediation-backtest"),
    path("windows/", views.maintenance_windows, name="maintenance-windows"),
    path("windows/<uuid:public_id>/<slug:action>/", views.window_action, name="maintenance-window-action"),
    path("repairs/", views.repair_list, name="repair-list"),
    path("repairs/<uuid:public_id>/", views.repair_detail, name="repair-detail"),
    path(
        "repairs/<uuid:public_id>/<slug:action>/",
        views.repair_action,
        name="repair-action",
    ),
]
