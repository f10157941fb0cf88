from django.urls import path

from apps.benchmarks import views

urlpatterns = [
    path("", views.benchmark_list, name="benchmarks"),
    path("start/", views.start, name="benchmark-start"),
    path("runs/<uuid:public_id>/", views.run_detail, name="benchmark-run"),
    path("runs/<uuid:public_id>/live/", views.run_live, name="benchmark-run-live"),
    path("runs/<uuid:public_id>/accept/", views.accept, name="benchmark-accept"),
    path("runs/<uuid:public_id>/cancel/", views.cancel, name="benchmark-cancel"),
    path("timelines/", views.timeline_list, name="benchmark-timelines"),
    path("timelines/upload/", views.timeline_upload, name="benchmark-timeline-upload"),
    path("timelines/from-job/", views.timeline_from_job, name="benchmark-timeline-from-job"),
    path("timelines/jobs/<uuid:public_id>/", views.timeline_job, name="benchmark-timeline-job"),
    path("timelines/jobs/<uuid:public_id>/live/", views.timeline_job_live, name="benchmark-timeline-job-live"),
    path("timelines/compare/", views.timeline_compare, name="benchmark-timeline-compare"),
    path("timelines/<uuid:public_id>/", views.timeline_detail, name="benchmark-timeline"),
]
