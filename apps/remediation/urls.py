from django.urls import path

from apps.remediation import views

urlpatterns = [
    path("", views.remediation, name="remediation"),
    path("backtest/", views.backtest_policy, name="remediation-backtest"),
]
