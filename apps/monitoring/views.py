"""Monitoring pages: Rackpilot's own /metrics, a node's BMC readings and settings."""

import secrets

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import generate_latest

from apps.monitoring.metrics import registry

# The classic text format, which every Prometheus reads (2.x ignores a newer version; 3.x reads both).
TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """The Prometheus text format. Open when RACKPILOT_METRICS_TOKEN is empty, else `Authorization: Bearer <token>`."""
    token = settings.RACKPILOT_METRICS_TOKEN
    if token:
        given = request.headers.get("Authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() != "bearer" or not secrets.compare_digest(value.strip().encode(), token.encode()):
            response = HttpResponse("A bearer token is needed for /metrics.\n", status=401, content_type="text/plain")
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
    return HttpResponse(generate_latest(registry()), content_type=TEXT_FORMAT)
