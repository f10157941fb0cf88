from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST
from rest_framework import serializers

from apps.accounts.choices import Role
from apps.accounts.decorators import role_required
from apps.core.forms import form_problems
from apps.health import costs, services
from apps.health.choices import ClearedBy
from apps.health.forms import ClearEventForm, ReliabilityForm
from apps.health.models import HealthEvent


def _page_of(event: HealthEvent, back: str = ""):
    """Where the event is shown: its node's page (or its switch's, its switch tray's rack); `back` "rack": its rack's
    page, where the rack's leaks are cleared."""
    rack = event.node.rack if event.node_id else None
    if back == "rack" and rack is not None:
        return redirect("rack-detail", public_id=rack.public_id)
    if event.node_id:
        return redirect("node-detail", public_id=event.node.public_id)
    if event.switch_id:
        return redirect("switch-detail", public_id=event.switch.public_id)
    if event.nvlink_switch_tray_id:
        return redirect("rack-detail", public_id=event.nvlink_switch_tray.domain.rack.public_id)
    return redirect("dashboard")


@role_required(Role.OPERATOR)
@require_POST
def clear_event(request, public_id):
    """An operator clears an event from its node or switch page, with a reason (audited)."""
    event = get_object_or_404(HealthEvent.objects.select_related("node__rack", "switch"), public_id=public_id)
    back = request.POST.get("back", "")
    form = ClearEventForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Not cleared: {form_problems(form)}")
        return _page_of(event, back)
    try:
        with transaction.atomic():
            services.clear_event(
                event=event, by=ClearedBy.OPERATOR, reason=form.cleaned_data["reason"], user=request.user
            )
    except serializers.ValidationError as error:
        messages.error(request, f"Not cleared: {' '.join(str(m) for ms in error.detail.values() for m in ms)}")
    else:
        messages.success(request, f"Cleared {event.kind} on {event.component_label}.")
    return _page_of(event, back)


@login_required
def reliability(request):
    """MTBF per component type and the lemons: the nodes and parts whose failures cost the most GPU-hours."""
    # Bound with the default under what was asked, so the select shows the window the page counts (it showed 7d).
    form = ReliabilityForm({"window": costs.RELIABILITY_DEFAULT, **request.GET.dict()})
    if not form.is_valid():
        return render(request, "health/reliability.html", {"form": form}, status=400)
    window = form.cleaned_data["window"] or costs.RELIABILITY_DEFAULT
    context = costs.reliability(window=window, now=timezone.now())
    return render(
        request, "health/reliability.html", {"form": form, **context, "windows": list(costs.RELIABILITY_WINDOWS)}
    )
