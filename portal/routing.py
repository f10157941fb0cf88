"""Websocket routes of every app."""

from apps.jobs.routing import websocket_urlpatterns as jobs_websockets

websocket_urlpatterns: list = [*jobs_websockets]
