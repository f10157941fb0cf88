"""Websocket routes of every app."""

from apps.diagnosis.routing import websocket_urlpatterns as diagnosis_websockets
from apps.jobs.routing import websocket_urlpatterns as jobs_websockets

websocket_urlpatterns: list = [*jobs_websockets, *diagnosis_websockets]
