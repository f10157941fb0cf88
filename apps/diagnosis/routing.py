from django.urls import path

from apps.diagnosis.consumers import IncidentConsumer

websocket_urlpatterns = [
    path("ws/incidents/<uuid:public_id>/", IncidentConsumer.as_asgi()),
]
