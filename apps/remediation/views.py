"""The remediation pages: policies and decisions; operators back-test a change to a policy (or a new one) and save
it from the back-test's result (docs/health.md, "Back-testing"); the rack page's one-click power-off of a leaking
rack's trays; the repairs list and a repair's page with its actions for operators (viewers read); the maintenance
windows, booked, ended early and deleted by operators."""

from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST
from rest_framework import serializers

from apps.accounts.choices import Role
from apps.accounts.decorators import role_required
from apps.core.forms import form_problems
from apps.core.text import counted
from apps.inventory.models import Gpu, Rack
from apps.remediation import repairs, services, windows
from apps.remediation.api.serializers import BACKTEST_WINDOWS
from apps.remediation.backtest import BacktestRefused, backtest
from apps.remediation.choices import REPAIR_ACTIVE, Outcome, PartType, RepairState
from apps.remediation.forms import BacktestForm, NoteForm, PartForm, WindowForm
from apps.remediation.models import MaintenanceWindow, RemediationDecision, RemediationPolicy, Repair

LATEST = 50


@login_required
def remediation(request: HttpRequest) -> HttpResponse:
    decisions = RemediationDecision.objects.select_related("event", "policy", "node", "window")[:LATEST]
    return render(
        request,
        "remediation/remediation.html",
        {
            "policies": RemediationPolicy.objects.prefetch_related("canary_racks").order_by("name"),
            "decisions": decisions,
            "latest": LATEST,
            # Actions deferred into a maintenance window, first to run first: the newest 50 may not show them.
            "waiting": RemediationDecision.objects.filter(outcome=Outcome.DEFERRED, act_at__isnull=False)
            .select_related("event", "policy", "node", "window__rack", "window__node")
            .order_by("act_at", "pk"),
            "may_change": request.user.has_role(Role.OPERATOR),
        },
    )


@require_POST
@role_required(Role.OPERATOR)
def power_off_trays(request: HttpRequest, public_id) -> HttpResponse:
    """Powers off the trays of a rack with an open coolant leak (the job records who asked)."""
    rack = get_object_or_404(Rack, public_id=public_id)
    leak = services.rack_leaks(rack).filter(kind="coolant_leak").select_related("node").order_by("pk").first()
    origin = services.leak_origin(leak) if leak else None
    if origin is None:
        messages.error(request, f"Rack {rack.name} has no open coolant leak: nothing powered off.")
        return redirect("rack-detail", public_id=rack.public_id)
    try:
        job = services.power_off_trays(node=origin, requested_by=request.user)
    except serializers.ValidationError as error:
        messages.error(
            request, f"Could not power off the trays of rack {rack.name}, nothing started: {services.said(error)}"
        )
        return redirect("rack-detail", public_id=rack.public_id)
    messages.success(request, f"Powering off {counted(job.node_count, 'tray')} of rack {rack.name}.")
    return redirect("job-page", public_id=job.public_id)


@require_POST
@role_required(Role.OPERATOR)
def power_on(request: HttpRequest, public_id) -> HttpResponse:
    """Powers the rack's nodes their BMCs read off back on (the job records who asked)."""
    rack = get_object_or_404(Rack, public_id=public_id)
    try:
        job = services.power_on_nodes(rack=rack, requested_by=request.user)
    except serializers.ValidationError as error:
        messages.error(request, f"Could not power on the nodes of rack {rack.name}: {services.said(error)}")
        return redirect("rack-detail", public_id=rack.public_id)
    messages.success(request, f"Powering on {counted(job.node_count, 'node')} of rack {rack.name}.")
    return redirect("job-page", public_id=job.public_id)


@role_required(Role.OPERATOR)
def backtest_policy(request: HttpRequest) -> HttpResponse:
    """GET: the form, filled from `?policy=` (a change) or blank (a new policy). POST `do=backtest`: the side-by-side
    result, nothing saved; POST `do=save`: saves it (audited), "on" only with a fresh back-test of these fields."""
    source = request.POST if request.method == "POST" else request.GET
    policy = None
    if source.get("policy"):
        policy = get_object_or_404(RemediationPolicy, public_id=source["policy"])
    if request.method != "POST":
        return render(request, "remediation/backtest.html", {"form": BacktestForm(instance=policy), "policy": policy})
    # The candidate is worked on as a copy: a back-test never saves it, whatever the form binds to.
    candidate = RemediationPolicy.objects.get(pk=policy.pk) if policy else None
    form = BacktestForm(request.POST, instance=candidate)
    context = {"form": form, "policy": policy}
    if not form.is_valid():
        return render(request, "remediation/backtest.html", context, status=400)
    if request.POST.get("do") == "save":
        if form.check_backtested():
            with transaction.atomic():
                saved = form.save()
            messages.success(request, f"Saved {saved.name} ({saved.stage}).")
            return redirect("remediation")
        return render(request, "remediation/backtest.html", context, status=400)
    data = form.cleaned_data
    now = timezone.now()
    try:
        context["report"] = backtest(
            [form.instance],
            since=now - timedelta(days=BACKTEST_WINDOWS[data["window"]]),
            until=now,
            campaign=data["seed"] if data["campaign"] else None,
            canary_racks={0: list(data["canary_racks"])} if data["canary_racks"] else None,
        )
    except BacktestRefused as refused:
        for messages_ in refused.errors.values():
            form.add_error("window", messages_)
        return render(request, "remediation/backtest.html", context, status=400)
    context["backtested"] = form.fingerprint()
    return render(request, "remediation/backtest.html", context)


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
            # What the operator can do next: the work and its validation while in repair, the return once it passed.
            "may_validate": repair.state in (RepairState.EVIDENCE_CAPTURED, RepairState.IN_REPAIR),
            "may_return": repair.state == RepairState.VALIDATING and repairs.passed_gate(repair) is not None,
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
                messages.error(request, f"Part not recorded: {form_problems(form)}")
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
            gate = repairs.start_validation(repair=repair, user=request.user, note=text)
            done = f"Validation started: {gate.get_kind_display()}."
        elif action == "return":
            repair = repairs.return_to_service(repair=repair, user=request.user)
            done = f"Returning {repair.node.hostname} to service: scheduler job {repair.resume_job_id}."
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


PAST_SHOWN = 50


def _window_page(request: HttpRequest, form: WindowForm, status: int = 200) -> HttpResponse:
    now = timezone.now()
    shown = MaintenanceWindow.objects.select_related("rack", "node").annotate(
        waiting=Count("deferred_decisions", filter=Q(deferred_decisions__outcome=Outcome.DEFERRED))
    )
    return render(
        request,
        "remediation/windows.html",
        {
            "upcoming": shown.filter(starts__gt=now).order_by("starts", "pk"),
            "open": shown.filter(starts__lte=now, ends__gt=now).order_by("ends", "pk"),
            "past": shown.filter(ends__lte=now).order_by("-ends", "-pk")[:PAST_SHOWN],
            "past_shown": PAST_SHOWN,
            "form": form,
            "may_change": request.user.has_role(Role.OPERATOR),
            "horizon_hours": settings.RACKPILOT_MAINTENANCE_DEFER_HOURS,
        },
        status=status,
    )


@login_required
def maintenance_windows(request: HttpRequest) -> HttpResponse:
    """GET: the upcoming, open and past windows. POST (operators): book one (audited); a bad field is a form error,
    nothing saved."""
    if request.method != "POST":
        return _window_page(request, WindowForm())
    if not request.user.has_role(Role.OPERATOR):
        raise PermissionDenied("This needs the operator role.")
    form = WindowForm(request.POST)
    if not form.is_valid():
        return _window_page(request, form, status=400)
    with transaction.atomic():
        window = windows.book(**form.cleaned_data)
    messages.success(request, f"Booked {windows.describe(window)}.")
    return redirect("maintenance-windows")


@require_POST
@role_required(Role.OPERATOR)
def window_action(request: HttpRequest, public_id, action: str) -> HttpResponse:
    """End an open window now, or delete one (what was deferred into it is decided again at the next evaluation)."""
    window = get_object_or_404(MaintenanceWindow.objects.select_related("rack", "node"), public_id=public_id)
    what = windows.describe(window)
    if action == "end":
        try:
            windows.end_early(window=window, now=timezone.now())
        except serializers.ValidationError as error:
            messages.error(request, f"Nothing changed: {_problem(error)}")
        else:
            messages.success(request, f"Ended {what} now.")
    elif action == "delete":
        with transaction.atomic():
            window.delete()
        messages.success(request, f"Deleted {what}.")
    else:
        raise Http404("No such action.")
    return redirect("maintenance-windows")
