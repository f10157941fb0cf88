"""Telemetry pages: the cluster and one node over a chosen window. Thin: apps.monitoring.services reads."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render

from apps.inventory.models import Node
from apps.monitoring import services
from apps.monitoring.telemetry import WINDOWS, Window


def _window(request) -> tuple[str, str]:
    """The window asked for (1h, 24h, 7d) and a message when the request named another."""
    name = request.GET.get("window", "1h")
    if name not in WINDOWS:
        return "1h", f"Unknown window {name[:20]!r}: choose one of {', '.join(WINDOWS)}. Showing 1h."
    return name, ""


@login_required
def cluster_telemetry(request):
    name, problem = _window(request)
    context = services.cluster_page(window=Window.named(name))
    return render(
        request, "monitoring/cluster.html", {**context, "window": name, "windows": list(WINDOWS), "problem": problem}
    )


@login_required
def node_telemetry(request, public_id):
    node = get_object_or_404(Node, public_id=public_id)
    name, problem = _window(request)
    context = services.node_page(node=node, window=Window.named(name))
    return render(
        request,
        "monitoring/node.html",
        {**context, "node": node, "window": name, "windows": list(WINDOWS), "problem": problem},
    )
