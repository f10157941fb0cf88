"""The remediation page: the policies and the latest decisions, read-only (changes go through the API)."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

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
