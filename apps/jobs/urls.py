from django.urls import path

from apps.jobs import views

urlpatterns = [
    path("", views.job_list, name="jobs-page"),
    path("new/", views.job_new, name="job-new"),
    path("<uuid:public_id>/", views.job_detail, name="job-page"),
    path("<uuid:public_id>/cancel/", views.job_cancel, name="job-cancel-page"),
    path("<uuid:public_id>/cells/<str:hostname>/<str:step>/", views.job_cell, name="job-cell"),
]
