"""Monitoring pages: the cluster and one node's telemetry over a chosen window, a node's BMC settings, and
Rackpilot's own /metrics. Thin: apps.monitoring.services and apps.monitoring.bmcs do the work."""

import secrets

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET
from prometheus_client import generate_latest

from apps.accounts.choices import Role
from apps.accounts.decorators import role_required
from apps.inventory.models import Node
from apps.monitoring import bmcs, services
from apps.monitoring.choices import BmcProtocol
from apps.monitoring.forms import BmcForm
from apps.monitoring.metrics import registry
from apps.monitoring.models import Bmc
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


@role_required(Role.OPERATOR)
def node_bmc_edit(request: HttpRequest, public_id) -> HttpResponse:
    """A node's BMC settings: operators edit them; the password is write-only."""
    node = get_object_or_404(Node, public_id=public_id)
    bmc = Bmc.objects.filter(node=node).first()
    initial = {"address": node.bmc_address, "protocol": BmcProtocol.IPMI, "verify_tls": True}
    if bmc is not None:
        initial |= {"protocol": bmc.protocol, "port": bmc.port, "user": bmc.user, "verify_tls": bmc.verify_tls}
    form = BmcForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            bmcs.save_bmc(
                node=node,
                address=data["address"],
                protocol=data["protocol"],
                port=data["port"],
                user=data["user"],
                verify_tls=data["verify_tls"],
                password=data["password"],
                clear_password=data["clear_password"],
            )
        except ValidationError as error:
            form.add_error(None, error)
        else:
            messages.success(request, f"BMC settings of {node.hostname} saved.")
            return redirect("node-detail", public_id=node.public_id)
    return render(request, "monitoring/bmc_form.html", {"node": node, "bmc": bmc, "form": form})
