from django.urls import path

from apps.automation import views

urlpatterns = [
    path("", views.template_list, name="automation"),
    path("templates/new/", views.template_edit, name="automation-template-new"),
    path("templates/<uuid:public_id>/", views.template_detail, name="automation-template"),
    path("templates/<uuid:public_id>/edit/", views.template_edit, name="automation-template-edit"),
    path("templates/<uuid:public_id>/run/", views.template_run, name="automation-template-run"),
    path("templates/<uuid:public_id>/delete/", views.template_delete, name="automation-template-delete"),
    path("schedules/", views.schedule_list, name="automation-schedules"),
    path("schedules/new/", views.schedule_edit, name="automation-schedule-new"),
    path("schedules/<uuid:public_id>/", views.schedule_detail, name="automation-schedule"),
    path("schedules/<uuid:public_id>/edit/", views.schedule_edit, name="automation-schedule-edit"),
    path("schedules/<uuid:public_id>/toggle/", views.schedule_toggle, name="automation-schedule-toggle"),
    path("schedules/<uuid:public_id>/delete/", views.schedule_delete, name="automation-schedule-delete"),
    path("notifications/", views.notification_list, name="automation-notifications"),
    path("notifications/new/", views.subscription_edit, name="automation-subscription-new"),
    path("notifications/<uuid:public_id>/edit/", views.subscription_edit, name="automation-subscription-edit"),
    path("notifications/<uuid:public_id>/delete/", views.subscription_delete, name="automation-subscription-delete"),
    path("notifications/<uuid:public_id>/test/", views.subscription_test, name="automation-subscription-test"),
]
