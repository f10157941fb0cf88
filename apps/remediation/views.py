"""The remediation page: the policies and the latest decisions, read-only (changes go through the API); and the rack
page's one-click power-off of a leaking rack's trays (operators)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST
from rest_framework import serializers

from apps.accounts.choices import Role
from apps.accounts.decorators import role_required
from apps.health.models import HealthEvent
from apps.inventory.models import Rack
from apps.remediation import services
from apps.remediation.models import RemediationDecision, RemediationPolicy

LATEST = 50


@login_required
def remediation(request: HttpRequest) -> HttpResponse:
    decisions = RemediationDecision.objects.select_related("event", "policy", "node")[:LATEST]
    return render(
        request,
        "remediation/remediation.html",
        {"policies": RemediationPolicy.objects.order_by("name"), "decisions": decisions, "latest": LATEST},
    )


@require_POST
@role_required(Role.OPERATOR)
def power_off_trays(request: HttpRequest, public_id) -> HttpResponse:
    """Powers off the trays of a rack with an open coolant leak (the job records who asked)."""
    rack = get_object_or_404(Rack, public_id=public_id)
    leak = HealthEvent.objects.open().filter(node__rack=rack, kind="coolant_leak").select_related("node").first()
    if leak is None:
        messages.error(request, f"Rack {rack.name} has no open coolant leak: nothing powered off.")
        return redirect("rack-detail", public_id=rack.public_id)
    try:
        job = services.power_off_trays(node=leak.node, requested_by=request.user)
    except serializers.ValidationError as error:
        messages.error(
            request, f"Could not power off the trays of rack {rack.name}, nothing started: {services.said(error)}"
        )
        return redirect("rack-detail", public_id=rack.public_id)
    messages.success(request, f"Powering off {job.node_count} tray(s) of rack {rack.name}.")
    return redirect("job-page", public_id=job.public_id)
