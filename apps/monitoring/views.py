"""Monitoring pages: the cluster and one node's telemetry over a chosen window, a node's BMC settings, and
Rackpilot's own /metrics. Thin: apps.monitoring.services and apps.monitoring.bmc do the work."""

import secrets

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from prometheus_client import generate_latest
from rest_framework.exceptions import ValidationError as DrfValidationError

from apps.accounts.choices import Role
from apps.accounts.decorators import role_required
from apps.inventory.models import Node, NvlinkSwitchTray
from apps.monitoring import charts, gpuhours, grafana, rule_files, services
from apps.monitoring.bmc import logins, power
from apps.monitoring.choices import BmcProtocol
from apps.monitoring.forms import BmcForm, SloForm
from apps.monitoring.metrics import registry
from apps.monitoring.models import Bmc, Slo
from apps.monitoring.telemetry import WINDOWS, TelemetryError, Window
from apps.monitoring.validation import runs
from apps.workloads.models import InferenceService


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


@login_required
def gpu_hours(request):
    """Where the GPU-hours went over the chosen window: per workload, rack and node."""
    name, problem = _window(request)
    context = {"window": name, "windows": list(WINDOWS), "problem": problem, "error": "", "result": None}
    try:
        result = gpuhours.gpu_hours(window=Window.named(name))
    except TelemetryError as error:
        context["error"] = str(error)
    else:
        for row in result.nodes:
            row["hostname"] = row["node"].hostname
        for row in result.racks:
            row["name"] = row["rack"].name
        context |= {
            "result": result,
            "source": result.source,
            "holders": gpuhours.idle_holders(result, count=10),
            "figures": {
                "gpu-hours-racks-figure": charts.figure_json(
                    charts.gpu_hours_figure(result.racks, label="name", title="GPU-hours per rack")
                ),
                "gpu-hours-nodes-figure": charts.figure_json(
                    charts.gpu_hours_figure(result.nodes, label="hostname", title="GPU-hours per node")
                ),
            },
        }
    return render(request, "monitoring/gpu_hours.html", context)


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
    return _bmc_edit(request, owner=node, field="node", back=reverse("node-detail", args=[node.public_id]))


@role_required(Role.OPERATOR)
def switch_tray_bmc_edit(request: HttpRequest, public_id) -> HttpResponse:
    """An NVLink switch tray's BMC settings (Redfish only): operators edit them; the password is write-only."""
    tray = get_object_or_404(NvlinkSwitchTray.objects.select_related("domain__rack"), public_id=public_id)
    return _bmc_edit(
        request, owner=tray, field="switch_tray", back=reverse("rack-detail", args=[tray.domain.rack.public_id])
    )


def _bmc_edit(request: HttpRequest, *, owner, field: str, back: str) -> HttpResponse:
    """The BMC settings form of a node or a switch tray (`field` says which); saved, back to `back`."""
    bmc = Bmc.objects.filter(**{field: owner}).first()
    name = owner.hostname if field == "node" else f"switch tray {owner.name}"
    protocol = BmcProtocol.REDFISH if field == "switch_tray" else BmcProtocol.IPMI
    initial = {"address": owner.bmc_address, "protocol": protocol, "verify_tls": True}
    if bmc is not None:
        initial |= {"protocol": bmc.protocol, "port": bmc.port, "user": bmc.user, "verify_tls": bmc.verify_tls}
    form = BmcForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            logins.save_bmc(
                **{field: owner},
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
            messages.success(request, f"BMC settings of {name} saved.")
            return redirect(back)
    context = {"name": name, "bmc": bmc, "form": form, "back": back}
    return render(request, "monitoring/bmc_form.html", context)


@role_required(Role.OPERATOR)
@require_POST
def node_bmc_power(request: HttpRequest, public_id) -> HttpResponse:
    """The node page's "Power cycle through the BMC" (confirmed in the browser first): starts the `bmc-power` job,
    audited with the operator and the reason, then shows the job."""
    node = get_object_or_404(Node, public_id=public_id)
    action = request.POST.get("action", "cycle")
    reason = request.POST.get("reason", "").strip()[:300]
    try:
        job = power.start_bmc_power(nodes=[node], action=action, reason=reason, requested_by=request.user)
    except DrfValidationError as error:
        problems = "; ".join(f"{field}: {' '.join(map(str, errors))}" for field, errors in error.detail.items())
        messages.error(request, f"Nothing was started: {problems}")
        return redirect("node-detail", public_id=node.public_id)
    messages.success(request, f"Power {action} of {node.hostname} through its BMC started.")
    return redirect("job-page", public_id=job.public_id)


@login_required
def slo_list(request: HttpRequest) -> HttpResponse:
    """Every SLO with its budget over 1 h, 24 h and 7 d; operators add one with the form below."""
    form = SloForm(request.POST or None) if request.user.has_role(Role.OPERATOR) else None
    if request.method == "POST":
        if form is None:
            return HttpResponse("Only operators define SLOs.", status=403)
        if form.is_valid():
            form.save()
            messages.success(request, f"SLO {form.instance.name} saved.")
            return redirect("slo-list")
    rows = Slo.objects.select_related("service", "training_job", "rack")
    context = {"statuses": services.slo_statuses(list(rows)), "form": form, "windows": services.SLO_WINDOWS}
    return render(request, "monitoring/slos.html", context)


@login_required
def slo_rules(request: HttpRequest) -> HttpResponse:
    """Prometheus recording and alerting rules for every SLO, and the telemetry pages' recorded series (load them
    with `rule_files:`)."""
    response = HttpResponse(rule_files.rules_text(), content_type="application/yaml")
    response["Content-Disposition"] = 'attachment; filename="rackpilot-slo-rules.yml"'
    return response


@login_required
def grafana_bundle(request: HttpRequest) -> HttpResponse:
    """Grafana's provisioning and dashboards as one zip (docs/monitoring.md, "Grafana")."""
    url = settings.RACKPILOT_PROMETHEUS_URL or "http://prometheus:9090"
    response = HttpResponse(grafana.bundle_zip(url), content_type="application/zip")
    response["Content-Disposition"] = 'attachment; filename="rackpilot-grafana.zip"'
    return response


@role_required(Role.OPERATOR)
@require_POST
def service_validate(request: HttpRequest, public_id) -> HttpResponse:
    """The inference service page's "Run business validation": the default load profile, then the job's page."""
    service = get_object_or_404(InferenceService, public_id=public_id)
    try:
        job = runs.start(service=service, parameters={}, requested_by=request.user)
    except DrfValidationError as error:
        messages.error(request, f"Business validation not started: {error.detail}")
        return redirect("service-detail", public_id=service.public_id)
    return redirect("job-page", public_id=job.public_id)
