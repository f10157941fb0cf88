"""Audit trail: every create, update and delete of an audited model, with who did it and through what.

Views set the actor and source for the request (AuditContextMiddleware); imports and commands use `audit_context`.
Saves made outside any context are recorded as the system's.
"""

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from django.apps import apps as django_apps
from django.core.exceptions import ObjectDoesNotExist
from django.db import models
from django.db.models.signals import post_delete, post_save, pre_delete
from django.dispatch import receiver
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.formats import date_format

from apps.core.choices import AuditAction, ChangeSource


@dataclass(frozen=True)
class AuditActor:
    source: str
    user: object | None = None
    # A request's user is read when a change is recorded: DRF authenticates API tokens inside the view.
    request: object | None = None
    job: object | None = None  # the job (or its public id) whose run makes the changes

    def resolve_user(self):
        user = self.user if self.user is not None else getattr(self.request, "user", None)
        return user if getattr(user, "is_authenticated", False) else None


_current: ContextVar[AuditActor | None] = ContextVar("rackpilot_audit_actor", default=None)


@contextlib.contextmanager
def audit_context(*, source: str, user=None, request=None, job=None) -> Iterator[None]:
    token = _current.set(AuditActor(source=source, user=user, request=request, job=job))
    try:
        yield
    finally:
        _current.reset(token)


def current_actor() -> AuditActor:
    return _current.get() or AuditActor(source=ChangeSource.SYSTEM)


class AuditedModel(models.Model):
    """Mixin for models whose changes land in the audit log. Remembers field values as loaded to diff on save."""

    class Meta:
        abstract = True

    @classmethod
    def from_db(cls, db, field_names, values):
        instance = super().from_db(db, field_names, values)
        instance._audit_loaded = dict(zip(field_names, values, strict=True))
        return instance

    def audit_values(self) -> dict:
        return {field.attname: getattr(self, field.attname) for field in self._meta.concrete_fields}


def _jsonable(value):
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    return str(value)


def describe(instance: models.Model) -> str:
    """The object's name for the log; never an error. str() may read related rows (a cable names its NICs): when one
    is gone (deleted by a parallel request, or earlier in the same cascade) the object is named by its own values,
    the related rows by their ids: "cable #12 (a_nic=5, b_switch=3)"."""
    try:
        return str(instance)
    except ObjectDoesNotExist:
        refs = ", ".join(
            f"{field.name}={getattr(instance, field.attname)}"
            for field in instance._meta.concrete_fields
            if field.is_relation and getattr(instance, field.attname) is not None
        )
        return f"{instance._meta.model_name} #{instance.pk}" + (f" ({refs})" if refs else "")


def record(
    action: str,
    *,
    obj: models.Model | None = None,
    object_type: str = "",
    object_id: str = "",
    object_repr: str | None = None,
    changes: dict | None = None,
    user=None,
    job=None,
) -> None:
    """One audit entry in the current context: a change of `obj`, or an action someone took on it (started a job,
    approved a fix, logged in). `user` overrides the context's, for actions whose actor is not the request's user."""
    from apps.core.models import AuditEntry

    actor = current_actor()
    user = user if user is not None else actor.resolve_user()
    job = job if job is not None else actor.job
    job = getattr(job, "public_id", job)
    AuditEntry.objects.create(
        actor=user if getattr(user, "pk", None) else None,
        actor_name=user.get_username() if user else "",
        source=actor.source,
        action=action,
        object_type=obj._meta.label_lower if obj is not None else object_type,
        object_id=str(obj.pk) if obj is not None else object_id,
        object_repr=(object_repr if object_repr is not None else describe(obj) if obj is not None else "")[:200],
        changes=changes or {},
        job=job,
    )


def _record(instance: AuditedModel, action: str, changes: dict, object_repr: str | None = None) -> None:
    record(action, obj=instance, object_repr=object_repr, changes=changes)


_IGNORED_FIELDS = {"created", "updated"}


def record_created(instances: list[AuditedModel]) -> None:
    """The audit entries of objects created together by bulk_create (which sends no post_save): the same entries
    the signal would write one by one, with one INSERT."""
    from apps.core.models import AuditEntry

    actor = current_actor()
    user = actor.resolve_user()
    entries = []
    for instance in instances:
        if not isinstance(instance, AuditedModel):
            continue
        changes = {
            name: [None, _jsonable(value)]
            for name, value in instance.audit_values().items()
            if name not in _IGNORED_FIELDS
        }
        entries.append(
            AuditEntry(
                actor=user,
                actor_name=user.get_username() if user else "",
                source=actor.source,
                action=AuditAction.CREATE,
                object_type=instance._meta.label_lower,
                object_id=str(instance.pk),
                object_repr=describe(instance)[:200],
                changes=changes,
                job=getattr(actor.job, "public_id", actor.job),
            )
        )
        instance._audit_loaded = instance.audit_values()
    if entries:
        AuditEntry.objects.bulk_create(entries)


def save_as(
    instance: AuditedModel,
    action: str,
    *,
    also: dict | None = None,
    object_repr: str | None = None,
    user=None,
    **save_kwargs,
) -> None:
    """Save a change that is an action someone took (approved a fix, cleared a health event): one entry that reads as
    that action ("Approved", "Cleared"), with the fields it changed and `also` (what was approved: its commands), where
    a plain save reads "Updated" and a second entry would tell the rest. `user` as for record()."""
    instance._audit_as = (action, also or {}, object_repr, user)
    try:
        instance.save(**save_kwargs)
    finally:
        del instance._audit_as


@receiver(post_save)
def _audit_save(sender, instance, created, raw=False, **kwargs):
    if raw or not isinstance(instance, AuditedModel):
        return
    now = instance.audit_values()
    if created:
        changes = {name: [None, _jsonable(value)] for name, value in now.items() if name not in _IGNORED_FIELDS}
        _record(instance, AuditAction.CREATE, changes)
        instance._audit_loaded = now  # a later save of this same instance diffs against what was created
        return
    before = getattr(instance, "_audit_loaded", {})
    changes = {
        name: [_jsonable(before.get(name)), _jsonable(value)]
        for name, value in now.items()
        if name not in _IGNORED_FIELDS and name in before and before[name] != value
    }
    instance._audit_loaded = now
    action, also, object_repr, user = getattr(instance, "_audit_as", (AuditAction.UPDATE, {}, None, None))
    changes |= also
    if changes:
        record(action, obj=instance, object_repr=object_repr, changes=changes, user=user)


@receiver(pre_delete)
def _remember_before_delete(sender, instance, **kwargs):
    # Name the object while everything it refers to still exists: a cascade may delete its NIC or node first.
    if isinstance(instance, AuditedModel):
        instance._audit_repr = describe(instance)


@receiver(post_delete)
def _audit_delete(sender, instance, **kwargs):
    if isinstance(instance, AuditedModel):
        _record(instance, AuditAction.DELETE, {}, object_repr=getattr(instance, "_audit_repr", None))


# --- reading --------------------------------------------------------------------------------------------------------


def type_label(object_type: str) -> str:
    """An entry's object type as a reader names it ("BMC", "API token"), not the model's label ("monitoring.bmc")."""
    try:
        model = django_apps.get_model(object_type)
    except (LookupError, ValueError):
        return object_type
    name = str(model._meta.verbose_name)
    return name[:1].upper() + name[1:]


@dataclass(frozen=True)
class ChangeRow:
    field: str
    before: str
    after: str


def _names_a_row(field) -> bool:
    """A foreign key or one-to-one (a BMC's node): shown by the row's name, never its id."""
    return field is not None and field.is_relation and (field.many_to_one or field.one_to_one)


def _time_in(value):
    """The aware datetime a recorded value spells (str() or isoformat() of one: "2026-12-06 03:05:27.27+00:00"), else
    None: a date alone or any other text stays as it is."""
    if not isinstance(value, str) or len(value) < 19 or value[10] not in "T ":
        return None
    try:
        when = parse_datetime(value)
    except ValueError:
        return None
    return when if when is not None and timezone.is_aware(when) else None


def in_words(value) -> str:
    """A stored value as the pages print it: a JSON object or list in words, a time as every page prints one."""
    return _shown(value, None, {})


def _shown(value, field, names: dict) -> str:
    if value is None or value == "":
        return "—"
    if _names_a_row(field):
        return names.get((field.related_model, str(value)), f"#{value} (deleted)")
    if field is not None and field.choices:
        return str(dict(field.flatchoices).get(value, value))
    if isinstance(value, bool):
        return "yes" if value else "no"
    when = _time_in(value)
    if when is not None:  # as every page prints a time (apps/core/formats), not "…03:05:27.271203+00:00"
        return date_format(timezone.localtime(when), "DATETIME_FORMAT")
    # A JSON value in words, never Python's repr of it ("{'gpu001': [0, 1]}"): "gpu001: 0, 1".
    if isinstance(value, dict):
        return "; ".join(f"{key}: {_shown(item, None, names)}" for key, item in value.items()) or "—"
    if isinstance(value, list):
        return ", ".join(_shown(item, None, names) for item in value) or "—"
    return str(value)


def attach_change_rows(entries):
    """Give each entry `.rows`: its changes as (field label, before, after) in words — related rows by name, choices
    by label — instead of attnames and ids; and `.object_type_label`, its object's type in words. One query per
    related model for the whole page."""
    plans, wanted = [], {}
    for entry in entries:
        try:
            model = django_apps.get_model(entry.object_type)
        except (LookupError, ValueError):
            model = None
        fields = {f.attname: f for f in model._meta.concrete_fields} if model is not None else {}
        plans.append((entry, fields))
        for attname, values in (entry.changes or {}).items():
            field = fields.get(attname)
            if _names_a_row(field):
                wanted.setdefault(field.related_model, set()).update(str(v) for v in values if v is not None)
    names = {}
    for model, ids in wanted.items():
        for row in model._default_manager.filter(pk__in=ids):
            names[(model, str(row.pk))] = describe(row)
    for entry, fields in plans:
        rows = []
        for attname, values in (entry.changes or {}).items():
            field = fields.get(attname)
            if field is not None and (field.primary_key or attname in getattr(model, "audit_hidden", ())):
                continue  # the entry names the object; its id and internal keys say nothing to a reader
            before, after = (list(values) + [None, None])[:2] if isinstance(values, list) else (None, values)
            label = str(field.verbose_name) if field is not None else attname.replace("_", " ")
            rows.append(ChangeRow(label, _shown(before, field, names), _shown(after, field, names)))
        entry.rows = rows
        entry.object_type_label = type_label(entry.object_type)
    return entries


def changes_in_words(entry) -> dict[str, list[str | None]]:
    """An entry's changes as the exports write them: field label -> [before, after] in words (related rows by name,
    choices by label; None for nothing), never attnames and internal ids. `attach_change_rows` first."""
    return {
        row.field: [None if row.before == "—" else row.before, None if row.after == "—" else row.after]
        for row in entry.rows
    }
