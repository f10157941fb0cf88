from django.urls import path

from apps.jobs.consumers import JobEventsConsumer, JobListConsumer

websocket_urlpatterns = [
    path("ws/jobs/", JobListConsumer.as_asgi()),
    path("ws/jobs/<uuid:public_id>/", JobEventsConsumer.as_asgi()),
]
