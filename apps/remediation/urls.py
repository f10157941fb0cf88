from django.urls import path

from apps.remediation import views

urlpatterns = [
    path("", views.remediation, name="remediation"),
    path("racks/<uuid:public_id>/power-off-trays/", views.power_off_trays, name="remediation-power-off-trays"),
    path("backtest/", views.backtest_policy, name="remediation-backtest"),
]
