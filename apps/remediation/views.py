"""The remediation pages: policies and decisions (read-only; changes go through the API), the repairs list and a
repair's page with its actions for operators (viewers read)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST
from rest_framework import serializers

from apps.accounts.choices import Role
from apps.accounts.decorators import role_required
from apps.inventory.models import Gpu
from apps.remediation import repairs
from apps.remediation.choices import REPAIR_ACTIVE, PartType
from apps.remediation.forms import NoteForm, PartForm
from apps.remediation.models import RemediationDecision, RemediationPolicy, Repair

LATEST = 50


@login_required
def remediation(request: HttpRequest) -> HttpResponse:
    decisions = RemediationDecision.objects.select_related("event", "policy", "node")[:LATEST]
    return render(
        request,
        "remediation/remediation.html",
        {"policies": RemediationPolicy.objects.order_by("name"), "decisions": decisions, "latest": LATEST},
    )


@login_required
def repair_list(request: HttpRequest) -> HttpResponse:
    shown = Repair.objects.select_related("node")
    if request.GET.get("active") != "all":
        shown = shown.filter(state__in=REPAIR_ACTIVE)
    return render(
        request, "remediation/repair_list.html", {"repairs": shown[:200], "all": request.GET.get("active") == "all"}
    )


@login_required
def repair_detail(request: HttpRequest, public_id) -> HttpResponse:
    repair = get_object_or_404(Repair.objects.select_related("node", "opened_by", "closed_by"), public_id=public_id)
    serial = (request.GET.get("serial") or "").strip()
    return render(
        request,
        "remediation/repair_detail.html",
        {
            "repair": repair,
            "events": repair.events.order_by("first_seen"),
            "decisions": repair.decisions.select_related("policy"),
            "parts": repair.parts.select_related("replaced_by"),
            "gates": repair.gates.prefetch_related("runs"),
            "may_act": request.user.has_role(Role.OPERATOR),
            "part_form": PartForm(),
            "part_types": PartType.choices,
            "serial": serial,
            "serial_history": repairs.part_history(serial) if serial else [],
        },
    )


def _problem(error: serializers.ValidationError) -> str:
    detail = error.detail
    if isinstance(detail, dict):
        return "; ".join(f"{field}: {' '.join(str(m) for m in messages_)}" for field, messages_ in detail.items())
    return " ".join(str(m) for m in detail)


@require_POST
@role_required(Role.OPERATOR)
def repair_action(request: HttpRequest, public_id, action: str) -> HttpResponse:
    """Capture evidence, start work, record a part, start the validation, return to service, close: each audited."""
    repair = get_object_or_404(Repair.objects.select_related("node"), public_id=public_id)
    back = redirect("repair-detail", public_id=repair.public_id)
    note = NoteForm(request.POST)
    note.is_valid()
    text = note.cleaned_data.get("note", "")
    try:
        if action == "capture-evidence":
            job = repairs.capture_evidence(repair=repair, user=request.user)
            done = f"Capturing evidence: job {job.public_id}."
        elif action == "start-work":
            repairs.start_work(repair=repair, user=request.user, note=text)
            done = "Work started."
        elif action == "record-part":
            form = PartForm(request.POST)
            if not form.is_valid():
                messages.error(request, "Part not recorded: " + "; ".join(
                    f"{field}: {' '.join(errors)}" for field, errors in form.errors.items()))  # fmt: skip
                return back
            data = form.cleaned_data
            gpu = None
            if data["component_type"] == PartType.GPU and data["gpu_index"] is not None:
                gpu = Gpu.objects.filter(node=repair.node, index=data["gpu_index"]).first()
            part = repairs.record_part(
                repair=repair, component_type=data["component_type"], gpu=gpu, label=data["label"],
                old_serial=data["old_serial"], new_serial=data["new_serial"], note=data["note"], user=request.user,
            )  # fmt: skip
            done = f"Recorded: {part}."
        elif action == "start-validation":
            gate = repairs.start_validation(repair=repair, user=request.user)
            done = f"Validation started: {gate.get_kind_display()}."
        elif action == "return":
            repairs.return_to_service(repair=repair, user=request.user)
            done = f"{repair.node.hostname} returned to service through the scheduler."
        elif action == "close":
            repairs.close_repair(repair=repair, user=request.user, note=text)
            done = "Repair closed."
        else:
            raise Http404("No such action.")
    except serializers.ValidationError as error:
        messages.error(request, f"Nothing changed: {_problem(error)}")
    else:
        messages.success(request, done)
    return back
