"""Automation pages: job templates (start one), schedules (enable, disable, last and next run, the jobs they
started) and notifications (subscriptions, the delivery log). Viewers read; operators change templates and
schedules (their own, or any as admin); admins manage subscriptions."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST
from rest_framework import serializers

from apps.accounts.choices import Role
from apps.accounts.decorators import role_required
from apps.automation import notifications, services
from apps.automation.choices import Channel
from apps.automation.forms import ScheduleForm, SubscriptionForm, TemplateForm
from apps.automation.models import Delivery, JobTemplate, Schedule, Subscription, TemplateRun
from apps.core.api import errors_beyond_shape
from apps.core.forms import add_service_errors
from apps.core.text import counted


def _may_change(request, obj) -> None:
    if not services.may_change(request.user, obj):
        raise PermissionDenied("Only its owner or an admin may change this.")


# --- templates ------------------------------------------------------------------------------------------------------


@login_required
def template_list(request):
    templates = JobTemplate.objects.select_related("owner").order_by("name")
    return render(
        request,
        "automation/template_list.html",
        {"templates": templates, "may_operate": request.user.has_role(Role.OPERATOR)},
    )


@login_required
def template_detail(request, public_id):
    template = get_object_or_404(JobTemplate.objects.select_related("owner"), public_id=public_id)
    runs = Paginator(
        TemplateRun.objects.filter(template=template).select_related("job", "schedule", "requested_by"), 25
    ).get_page(request.GET.get("page"))
    return render(
        request,
        "automation/template_detail.html",
        {
            "template": template,
            "runs": runs,
            "schedules": template.schedules.all(),
            "may_run": request.user.has_role(Role.OPERATOR),
            "may_change": services.may_change(request.user, template),
        },
    )


def _template_errors(template, form: TemplateForm):
    """What the template's own checks say of the form's fields that passed."""

    def check(data: dict, refused: set[str]) -> dict:
        return services.template_errors(template=template, **form.passed_fields(refused))

    return check


@role_required(Role.OPERATOR)
def template_edit(request, public_id=None):
    template = get_object_or_404(JobTemplate, public_id=public_id) if public_id else None
    if template is not None:
        _may_change(request, template)
    initial = TemplateForm.initial_of(template) if template else {"nodes": request.GET.getlist("node")}
    form = TemplateForm(request.POST or None, initial=initial)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                saved = services.save_template(template=template, user=request.user, **form.service_fields())
            except serializers.ValidationError as error:
                add_service_errors(form, error.detail)
            else:
                messages.success(request, f"Saved the job template “{saved.name}”.")
                return redirect("automation-template", public_id=saved.public_id)
        else:
            add_service_errors(
                form, errors_beyond_shape(form.errors, form.cleaned_data, _template_errors(template, form))
            )
        status = 400
    return render(request, "automation/template_form.html", {"form": form, "template": template}, status=status)


@require_POST
@role_required(Role.OPERATOR)
def template_run(request, public_id):
    template = get_object_or_404(JobTemplate, public_id=public_id)
    try:
        run = services.run_template(template=template, requested_by=request.user)
    except serializers.ValidationError as error:
        messages.error(request, f"Nothing started: {services._flatten(error.detail)}")
        return redirect("automation-template", public_id=template.public_id)
    messages.success(
        request, f"{run.job.kind} started on {counted(run.job.node_count, 'node')} from “{template.name}”."
    )
    return redirect("job-page", public_id=run.job.public_id)


@require_POST
@role_required(Role.OPERATOR)
def template_delete(request, public_id):
    template = get_object_or_404(JobTemplate, public_id=public_id)
    _may_change(request, template)
    services.delete_template(template=template, user=request.user)
    messages.success(request, f"Deleted the job template “{template.name}” and its schedules.")
    return redirect("automation")


# --- schedules ------------------------------------------------------------------------------------------------------


def _with_next(schedules):
    now = timezone.now()
    for schedule in schedules:
        schedule.next_at = services.next_run(schedule, now)
    return schedules


@login_required
def schedule_list(request):
    schedules = _with_next(list(Schedule.objects.select_related("template", "owner").order_by("name")))
    return render(
        request,
        "automation/schedule_list.html",
        {"schedules": schedules, "may_operate": request.user.has_role(Role.OPERATOR)},
    )


@login_required
def schedule_detail(request, public_id):
    schedule = get_object_or_404(Schedule.objects.select_related("template", "owner"), public_id=public_id)
    _with_next([schedule])
    runs = Paginator(schedule.runs.select_related("job"), 25).get_page(request.GET.get("page"))
    return render(
        request,
        "automation/schedule_detail.html",
        {"schedule": schedule, "runs": runs, "may_change": services.may_change(request.user, schedule)},
    )


def _schedule_errors(schedule):
    """What the schedule's own checks say of the form's fields that passed."""

    def check(data: dict, refused: set[str]) -> dict:
        return services.schedule_errors(schedule=schedule, refused=refused, **data)

    return check


@role_required(Role.OPERATOR)
def schedule_edit(request, public_id=None):
    schedule = get_object_or_404(Schedule, public_id=public_id) if public_id else None
    if schedule is not None:
        _may_change(request, schedule)
        initial = {name: getattr(schedule, name) for name in services.SCHEDULE_FIELDS if name != "template"}
        initial["template"] = schedule.template.public_id
    else:
        initial = {"template": request.GET.get("template")}
    form = ScheduleForm(request.POST or None, initial=initial)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                saved = services.save_schedule(schedule=schedule, user=request.user, **form.cleaned_data)
            except serializers.ValidationError as error:
                add_service_errors(form, error.detail)
            else:
                messages.success(request, f"Saved the schedule “{saved.name}”.")
                return redirect("automation-schedule", public_id=saved.public_id)
        else:
            add_service_errors(form, errors_beyond_shape(form.errors, form.cleaned_data, _schedule_errors(schedule)))
        status = 400
    return render(request, "automation/schedule_form.html", {"form": form, "schedule": schedule}, status=status)


@require_POST
@role_required(Role.OPERATOR)
def schedule_toggle(request, public_id):
    schedule = get_object_or_404(Schedule, public_id=public_id)
    _may_change(request, schedule)
    services.set_enabled(schedule=schedule, enabled=not schedule.enabled, user=request.user)
    messages.success(request, f"{'Enabled' if schedule.enabled else 'Disabled'} the schedule “{schedule.name}”.")
    if request.POST.get("next") == "detail":
        return redirect("automation-schedule", public_id=schedule.public_id)
    return redirect("automation-schedules")


@require_POST
@role_required(Role.OPERATOR)
def schedule_delete(request, public_id):
    schedule = get_object_or_404(Schedule, public_id=public_id)
    _may_change(request, schedule)
    services.delete_schedule(schedule=schedule, user=request.user)
    messages.success(request, f"Deleted the schedule “{schedule.name}”.")
    return redirect("automation-schedules")


# --- notifications --------------------------------------------------------------------------------------------------


@login_required
def notification_list(request):
    deliveries = Delivery.objects.select_related("notification")
    status = request.GET.get("status", "")
    if status:
        deliveries = deliveries.filter(status=status)
    page = Paginator(deliveries, 50).get_page(request.GET.get("page"))
    return render(
        request,
        "automation/notification_list.html",
        {
            "subscriptions": Subscription.objects.select_related("owner"),
            "deliveries": page,
            "status": status,
            "statuses": Delivery._meta.get_field("status").choices,
            "may_manage": request.user.has_role(Role.ADMIN),
        },
    )


@role_required(Role.ADMIN)
def subscription_edit(request, public_id=None):
    subscription = get_object_or_404(Subscription, public_id=public_id) if public_id else None
    initial = {}
    if subscription is not None:
        initial = {
            "name": subscription.name,
            "channel": subscription.channel,
            "events": subscription.events,
            "url": subscription.url,
            "recipients": "\n".join(subscription.recipient_list()),
            "enabled": subscription.enabled,
        }
    form = SubscriptionForm(request.POST or None, initial=initial)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            data = dict(form.cleaned_data)
            try:
                saved = notifications.save_subscription(subscription=subscription, user=request.user, **data)
            except serializers.ValidationError as error:
                add_service_errors(form, error.detail)
            else:
                messages.success(request, f"Saved the subscription “{saved.name}”.")
                return redirect("automation-notifications")
        status = 400
    return render(
        request,
        "automation/subscription_form.html",
        {"form": form, "subscription": subscription, "webhook": Channel.WEBHOOK},
        status=status,
    )


@require_POST
@role_required(Role.ADMIN)
def subscription_delete(request, public_id):
    subscription = get_object_or_404(Subscription, public_id=public_id)
    subscription.delete()
    messages.success(request, f"Deleted the subscription “{subscription.name}”.")
    return redirect("automation-notifications")


@require_POST
@role_required(Role.ADMIN)
def subscription_test(request, public_id):
    subscription = get_object_or_404(Subscription, public_id=public_id)
    notifications.send_test(subscription=subscription, user=request.user)
    messages.info(request, f"A test notification is on its way to “{subscription.name}”; see the delivery log.")
    return redirect("automation-notifications")
