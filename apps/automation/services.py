"""Job templates and schedules: validate and save them, start a template's job (by hand or for a schedule's tick),
claim each tick once in the database, and mirror each schedule into django-celery-beat's PeriodicTask.

Views, API actions and tasks call these; none takes a request.
"""

import json
import logging

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask
from rest_framework import serializers

from apps.accounts.choices import Role
from apps.automation import timing
from apps.automation.choices import RunStatus, Timing
from apps.automation.models import JobTemplate, Schedule, TemplateRun
from apps.core import audit
from apps.core.choices import AuditAction
from apps.core.text import counted
from apps.jobs import services as jobs
from apps.jobs.events import emit
from apps.jobs.models import Job

logger = logging.getLogger(__name__)

RUN_SCHEDULE_TASK = "rackpilot.automation.run_schedule"
TARGET_KEYS = ("nodes", "racks", "tags", "role")


class NotAllowed(PermissionError):
    """The user may not change this object (neither its owner nor an admin)."""


def may_change(user, obj) -> bool:
    """Templates, schedules: their owner or an admin changes them; any operator may start them."""
    if not (user and user.is_authenticated and user.has_role(Role.OPERATOR)):
        return False
    return user.has_role(Role.ADMIN) or obj.owner_id is None or obj.owner_id == user.pk


# --- templates ------------------------------------------------------------------------------------------------------


def target_spec(targets: dict) -> jobs.TargetSpec:
    return jobs.TargetSpec(
        nodes=tuple(targets.get("nodes") or ()),
        racks=tuple(targets.get("racks") or ()),
        tags=tuple(targets.get("tags") or ()),
        role=targets.get("role") or "",
    )


def validate_template(*, kind: str, parameters: dict | None, targets: dict, transport: str = "") -> dict:
    """The template's stored parameters (validated by the kind, JSON-safe) and targets; ValidationError naming the
    field (`kind`, `parameters.<name>`, `transport`, `targets`) otherwise, the same checks a job's start makes."""
    errors, checked = _judged(kind=kind, parameters=parameters, targets=targets, transport=transport)
    if errors:
        raise serializers.ValidationError(errors)
    return checked


def _judged(*, kind: str | None, parameters, targets: dict | None, transport) -> tuple[dict, dict]:
    """(every bad field at once, the checked parameters and targets); a part given as None is not judged."""
    errors: dict = {}
    params = cleaned = None
    if kind is not None:
        try:
            jobs.check_startable(kind=kind)
        except serializers.ValidationError as error:
            errors |= error.detail
        try:
            _, params, _ = jobs.check_request(kind=kind, parameters=parameters, transport=transport or None)
        except serializers.ValidationError as error:
            errors = error.detail | errors  # the kind's first refusal stands
    if targets is not None:
        cleaned = {key: targets[key] for key in TARGET_KEYS if targets.get(key)}
        cleaned = {key: list(value) if key != "role" else value for key, value in cleaned.items()}
        if not cleaned:
            errors["targets"] = ["Name nodes, racks, tags or a role."]
        else:
            try:
                jobs.resolve_selection(target_spec(cleaned))  # names that match nothing are refused now, not at 2 a.m.
            except serializers.ValidationError as error:
                errors |= error.detail
    return errors, {"parameters": params, "targets": cleaned}


def _name_errors(name: str, template: JobTemplate | None) -> dict:
    if JobTemplate.objects.filter(name=name).exclude(pk=getattr(template, "pk", None)).exists():
        return {"name": ["A job template with this name exists."]}
    return {}


def template_fields(template: JobTemplate | None) -> dict:
    """The fields save_template judges, as the template holds them (a new one: none yet)."""
    return {
        "name": template.name if template else "",
        "kind": template.kind if template else "",
        "parameters": template.parameters if template else {},
        "targets": template.targets if template else {},
        "transport": template.transport if template else "",
    }


def template_errors(
    *, template: JobTemplate | None = None, name=None, kind=None, parameters=None, targets=None, transport=None
) -> dict:
    """What save_template would refuse of the fields given (None: refused by the door's shape, not judged), saving
    nothing: a door that checks shapes first reports these beside its own, every bad field at once."""
    errors, _ = _judged(kind=kind, parameters=parameters, targets=targets, transport=transport)
    return errors | (_name_errors(name, template) if name is not None else {})


def save_template(*, template: JobTemplate | None = None, user, **fields) -> JobTemplate:
    """Create (template None) or change a template; fields: name, description, kind, parameters, targets,
    transport, only_idle. Audited (the model's own audit entries). NotAllowed, ValidationError naming every bad
    field at once."""
    if template is not None and not may_change(user, template):
        raise NotAllowed("Only the template's owner or an admin may change it.")
    merged = {key: fields.get(key, value) for key, value in template_fields(template).items()}
    errors, checked = _judged(
        kind=merged["kind"], parameters=merged["parameters"], targets=merged["targets"], transport=merged["transport"]
    )
    errors |= _name_errors(merged["name"], template)
    if errors:
        raise serializers.ValidationError(errors)
    template = template or JobTemplate(owner=user if getattr(user, "is_authenticated", False) else None)
    template.name = merged["name"]
    template.kind, template.transport = merged["kind"], merged["transport"] or ""
    template.parameters, template.targets = checked["parameters"], checked["targets"]
    for key in ("description", "only_idle"):
        if key in fields:
            setattr(template, key, fields[key])
    template.save()
    return template


def delete_template(*, template: JobTemplate, user) -> None:
    if not may_change(user, template):
        raise NotAllowed("Only the template's owner or an admin may delete it.")
    with transaction.atomic():
        for schedule in template.schedules.all():
            _delete_periodic_task(schedule)
        template.delete()


def busy_node_ids() -> set[int]:
    """Nodes a queued or running job is using now."""
    return set(Job.objects.active().values_list("nodes", flat=True)) - {None}


def run_template(*, template: JobTemplate, requested_by=None, run: TemplateRun | None = None) -> TemplateRun:
    """Start the template's job. By hand (run None): ValidationError as a job start gives it. For a schedule's claimed
    run: the run records the job, or why none started (skipped: every node busy; error: the targets or parameters
    no longer hold)."""
    spec = target_spec(template.targets)
    left_out: list[str] = []
    try:
        if template.only_idle:
            selection = jobs.resolve_selection(spec)
            busy = busy_node_ids()
            idle = [node.hostname for node in selection.nodes if node.pk not in busy]
            left_out = [node.hostname for node in selection.nodes if node.pk in busy]
            if not idle:
                return _ended(run, template, requested_by, RunStatus.SKIPPED, "every target node is busy with a job")
            spec = jobs.TargetSpec(nodes=tuple(idle))
        jobs.check_startable(kind=template.kind)  # a template saved before its kind became approval-only
        job = jobs.create_job(
            kind=template.kind,
            targets=spec,
            parameters=template.parameters,
            transport=template.transport or None,
            requested_by=requested_by,
        )
    except serializers.ValidationError as error:
        if run is None:
            raise
        return _ended(run, template, requested_by, RunStatus.ERROR, _flatten(error.detail))
    where = f"schedule “{run.schedule.name}” ({run.tick:%Y-%m-%d %H:%M %Z})" if run and run.schedule else "by hand"
    emit(job, f"started from job template “{template.name}”, {where}", data={"template": str(template.public_id)})
    if left_out:
        emit(
            job, f"left out {counted(len(left_out), 'busy node')}: {', '.join(left_out[:50])}", data={"busy": left_out}
        )
    if run is None:
        run = TemplateRun.objects.create(template=template, job=job, requested_by=requested_by)
    else:
        TemplateRun.objects.filter(pk=run.pk).update(job=job, status=RunStatus.STARTED, updated=timezone.now())
        run.job = job
    audit.record(
        AuditAction.START,
        obj=run.schedule if run.schedule else template,
        object_repr=f"{'schedule' if run.schedule else 'job template'} {run.schedule or template}: {job.kind} job",
        changes={"job": [None, str(job.public_id)]},
        user=requested_by,
        job=job,
    )
    return run


def _ended(run, template, requested_by, status: str, message: str) -> TemplateRun:
    if run is None:
        if status == RunStatus.SKIPPED:
            raise serializers.ValidationError({"targets": [f"Nothing started: {message}."]})
        return TemplateRun.objects.create(template=template, requested_by=requested_by, status=status, message=message)
    TemplateRun.objects.filter(pk=run.pk).update(status=status, message=message[:500], updated=timezone.now())
    run.status, run.message = status, message[:500]
    logger.warning("schedule %s: %s", run.schedule, message)
    return run


def _flatten(detail, prefix: str = "") -> str:
    if isinstance(detail, dict):
        return "; ".join(_flatten(value, f"{prefix}{key}: ") for key, value in detail.items())
    if isinstance(detail, list):
        return "; ".join(_flatten(value, prefix) for value in detail)
    return f"{prefix}{detail}"


# --- schedules ------------------------------------------------------------------------------------------------------


def timing_errors(*, timing_kind: str, every_minutes=None, refused=frozenset(), **crontab_fields) -> dict:
    """What is wrong with a schedule's timing, by field (empty when nothing is). Fields in `refused` (refused by the
    door's shape) are not judged, nor whether a crontab that has one of them ever fires."""
    if timing_kind == Timing.INTERVAL:
        if "every_minutes" not in refused and (not every_minutes or every_minutes < 1):
            return {"every_minutes": ["Give the interval in minutes (1 or more)."]}
        return {}
    if timing_kind != Timing.CRONTAB:
        return {"timing": ["crontab or interval."]}
    given = {name: value for name, value in crontab_fields.items() if name not in refused}
    if errors := timing.crontab_errors(**given):
        return errors
    if len(given) < len(timing.CRONTAB_FIELDS):
        return {}
    probe = Schedule(timing=Timing.CRONTAB, created=timezone.now(), **given)
    if timing.next_run(probe, timezone.now()) is None:
        return {"day_of_month": ["This crontab never fires within a year."]}
    return {}


SCHEDULE_FIELDS = ("name", "template", "timing", *timing.CRONTAB_FIELDS, "every_minutes", "enabled")


def schedule_fields(schedule: Schedule | None) -> dict:
    """The fields save_schedule judges, as the schedule holds them (a new one: the model's defaults, no template)."""
    schedule = schedule or Schedule()
    values = {key: getattr(schedule, key) for key in SCHEDULE_FIELDS if key != "template"}
    return {**values, "template": schedule.template if schedule.template_id else None}


def _merged(schedule: Schedule | None, fields: dict) -> dict:
    """The schedule's fields with those given; None keeps the current value, but for every_minutes (None: no
    interval)."""
    current = schedule_fields(schedule)
    merged = {key: value if fields.get(key) is None else fields[key] for key, value in current.items()}
    if "every_minutes" in fields:
        merged["every_minutes"] = fields["every_minutes"]
    return merged


def _schedule_problems(schedule: Schedule | None, values: dict, refused: frozenset | set) -> dict:
    """Every bad field of the schedule `values` describe, saving nothing; fields in `refused` are not judged."""
    errors: dict = {}
    if "name" not in refused:
        if not values["name"]:
            errors["name"] = ["Give the schedule a name."]
        elif Schedule.objects.filter(name=values["name"]).exclude(pk=getattr(schedule, "pk", None)).exists():
            errors["name"] = ["A schedule with this name exists."]
    if "template" not in refused and values["template"] is None:
        errors["template"] = ["Choose a job template."]
    if "timing" not in refused:
        crontab_fields = {name: values[name] for name in timing.CRONTAB_FIELDS}
        errors |= timing_errors(
            timing_kind=values["timing"], every_minutes=values["every_minutes"], refused=refused, **crontab_fields
        )
    return errors


def schedule_errors(*, schedule: Schedule | None = None, refused: frozenset | set = frozenset(), **fields) -> dict:
    """What save_schedule would refuse of these fields, by field, saving nothing: a field not given keeps the
    schedule's value, one in `refused` (refused by the door's shape) is not judged. A door that checks shapes first
    reports these beside its own, every bad field at once."""
    return _schedule_problems(schedule, _merged(schedule, fields), refused)


def save_schedule(*, schedule: Schedule | None = None, user, **fields) -> Schedule:
    """Create or change a schedule and its PeriodicTask in one transaction. NotAllowed, ValidationError naming every
    bad field at once (nothing saved then)."""
    if schedule is not None and not may_change(user, schedule):
        raise NotAllowed("Only the schedule's owner or an admin may change it.")
    values = _merged(schedule, fields)
    if errors := _schedule_problems(schedule, values, frozenset()):
        raise serializers.ValidationError(errors)
    schedule = schedule or Schedule(owner=user if getattr(user, "is_authenticated", False) else None)
    for key, value in values.items():
        setattr(schedule, key, value)
    if schedule.timing == Timing.CRONTAB:
        schedule.every_minutes = None
    with transaction.atomic():
        schedule.save()
        sync_periodic_task(schedule)
    return schedule


def set_enabled(*, schedule: Schedule, enabled: bool, user) -> Schedule:
    return save_schedule(schedule=schedule, user=user, enabled=enabled)


def delete_schedule(*, schedule: Schedule, user) -> None:
    if not may_change(user, schedule):
        raise NotAllowed("Only the schedule's owner or an admin may delete it.")
    with transaction.atomic():
        _delete_periodic_task(schedule)
        schedule.delete()


def sync_periodic_task(schedule: Schedule) -> PeriodicTask:
    """The schedule as django-celery-beat's PeriodicTask (beat's DatabaseScheduler sees the change on its next sync)."""
    task = schedule.periodic_task or PeriodicTask(name=f"rackpilot-schedule-{schedule.public_id}")
    task.task = RUN_SCHEDULE_TASK
    task.args = json.dumps([str(schedule.public_id)])
    task.kwargs = "{}"
    task.enabled = schedule.enabled
    task.description = f"Job template “{schedule.template.name}”, schedule “{schedule.name}” (Rackpilot)"[:200]
    if schedule.timing == Timing.INTERVAL:
        task.interval, _ = IntervalSchedule.objects.get_or_create(
            every=schedule.every_minutes, period=IntervalSchedule.MINUTES
        )
        task.crontab = None
    else:
        task.crontab, _ = CrontabSchedule.objects.get_or_create(
            minute=schedule.minute,
            hour=schedule.hour,
            day_of_month=schedule.day_of_month,
            month_of_year=schedule.month_of_year,
            day_of_week=schedule.day_of_week,
            timezone=settings.TIME_ZONE,
        )
        task.interval = None
    task.save()
    if schedule.periodic_task_id != task.pk:
        Schedule.objects.filter(pk=schedule.pk).update(periodic_task=task)
        schedule.periodic_task = task
    return task


def _delete_periodic_task(schedule: Schedule) -> None:
    if schedule.periodic_task_id:
        PeriodicTask.objects.filter(pk=schedule.periodic_task_id).delete()


def run_schedule_tick(*, schedule_id: str, now=None) -> TemplateRun | None:
    """What beat's message for a schedule does: claim the tick it is for, once, then start the template's job.

    The claim is a conditional UPDATE of the schedule's last tick (an interval's next claim must be at least half an
    interval later) and a TemplateRun unique per (schedule, tick), in one transaction: with two beat processes
    started by mistake, or two workers taking copies of the message, one claim wins and the others do nothing.
    None: not claimed (disabled, deleted, or the tick already ran)."""
    now = now or timezone.now()
    schedule = Schedule.objects.select_related("template").filter(public_id=schedule_id).first()
    if schedule is None or not schedule.enabled:
        return None
    tick = timing.tick_for(schedule, now)
    limit = tick - timing.guard(schedule)
    try:
        with transaction.atomic():
            claimed = (
                Schedule.objects.filter(pk=schedule.pk, enabled=True)
                .filter(Q(last_tick__isnull=True) | Q(last_tick__lt=limit))
                .update(last_tick=tick, last_run_at=now)
            )
            if not claimed:
                return None
            run = TemplateRun.objects.create(template=schedule.template, schedule=schedule, tick=tick)
    except IntegrityError:
        return None
    run.schedule = schedule
    return run_template(template=schedule.template, run=run)


def run_due_schedules(*, now=None) -> int:
    """The embedded wiring's beat: run each enabled schedule whose latest tick has not run (same claim as beat's)."""
    now = now or timezone.now()
    started = 0
    for schedule in Schedule.objects.filter(enabled=True).select_related("template"):
        due = timing.latest_due(schedule, now)
        if due is None or (schedule.last_tick is not None and due < schedule.last_tick + timing.guard(schedule)):
            continue
        if due <= (schedule.last_tick or schedule.created) and schedule.last_tick is not None:
            continue
        if run_schedule_tick(schedule_id=str(schedule.public_id), now=due) is not None:
            started += 1
    return started


def next_run(schedule: Schedule, now=None):
    return timing.next_run(schedule, now or timezone.now()) if schedule.enabled else None
