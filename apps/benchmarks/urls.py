from django.urls import path

from apps.benchmarks import views

urlpatterns = [
    path("", views.benchmark_list, name="benchmarks"),
    path("start/", views.start, name="benchmark-start"),
    path("runs/<uuid:public_id>/", views.run_detail, name="benchmark-run"),
    path("runs/<uuid:public_id>/live/", views.run_live, name="benchmark-run-live"),
    path("runs/<uuid:public_id>/accept/", views.accept, name="benchmark-accept"),
]
