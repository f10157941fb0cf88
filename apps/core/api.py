"""API pieces shared by every app: references by public id or name, every bad field at once (the shape's errors
with the service's or the model's checks of the fields that passed), and errors that never become 500s."""

import uuid
from collections.abc import Callable, Mapping

from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError, IntegrityError, models
from django.urls import reverse as page_reverse
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.fields import SkipField
from rest_framework.reverse import reverse
from rest_framework.views import exception_handler as drf_exception_handler

from apps.core.text import echo

MAX_NATURAL_KEY_LENGTH = 255  # the longest name or slug field a reference can name
_PLACEHOLDER = str(uuid.UUID(int=0))


def detail_url(obj, request) -> str:
    """The object's API URL, every object's `url` (absolute, given the request). Reversed once per model and request,
    then filled in: a list of 100 nodes with their racks, sites and SKUs would otherwise spend a quarter of its time
    in reverse()."""
    templates = request.__dict__.setdefault("_detail_url_templates", {}) if request is not None else {}
    model = obj._meta.model_name
    if model not in templates:
        # In the API's URL namespace (portal/urls.py), so the UI's own "node-detail" never wins; the public id by
        # position, as viewsets name it `public_id` or `id`.
        templates[model] = reverse(f"api:{model}-detail", args=[_PLACEHOLDER], request=request)
    return templates[model].replace(_PLACEHOLDER, str(obj.public_id))


def page_url(name: str, obj, request) -> str:
    """The object's page in the portal (`page` beside `url`), absolute given the request, as `url` is."""
    path = page_reverse(name, args=[obj.public_id])
    return request.build_absolute_uri(path) if request is not None else path


class ReferenceField(serializers.RelatedField):
    """A reference to another object, written as its public id or its natural key and read back as the key.

    The natural key is a field (`"hostname"`, `"name"`) or, for what is named inside another object, several joined
    by colons (`("node__hostname", "name")` reads `gpu001:ens1np0`). A name shared by several objects (racks of
    two sites) is refused with the count: the public id is then the way to say which.
    """

    default_error_messages = {
        "does_not_exist": "No {model} matches {value}.",
        "ambiguous": "{count} {models} are named {value}; give the public id.",
        "incorrect_type": "Give the {model}'s public id{alternative}.",
    }

    def __init__(self, *, natural_key: str | tuple[str, ...] | None = None, **kwargs):
        self.natural_key = natural_key
        super().__init__(**kwargs)

    @property
    def natural_key_label(self) -> str:
        """How the natural key reads in messages and the schema: `hostname`, `hostname:name`."""
        keys = (self.natural_key,) if isinstance(self.natural_key, str) else self.natural_key or ()
        return ":".join(key.rsplit("__", 1)[-1] for key in keys)

    def use_pk_only_optimization(self) -> bool:
        return False  # the representation needs the object itself

    def _natural_lookup(self, data: str) -> dict | None:
        if isinstance(self.natural_key, str):
            return {self.natural_key: data}
        parts = data.split(":", len(self.natural_key) - 1)  # a host name holds no colon; an interface name may
        return dict(zip(self.natural_key, parts, strict=True)) if len(parts) == len(self.natural_key) else None

    def to_internal_value(self, data):
        queryset = self.get_queryset()
        meta = queryset.model._meta
        if not isinstance(data, str) or not data:
            alternative = f" or {self.natural_key_label}" if self.natural_key else ""
            self.fail("incorrect_type", model=meta.verbose_name, alternative=alternative)
        try:
            lookup = {"public_id": uuid.UUID(data)}
        except ValueError:
            # No name holds a NUL (PostgreSQL cannot even be asked for one) or runs past a name's longest length.
            lookup = None
            if self.natural_key and "\x00" not in data and len(data) <= MAX_NATURAL_KEY_LENGTH:
                lookup = self._natural_lookup(data)
        if lookup is None:
            self.fail("does_not_exist", model=meta.verbose_name, value=echo(data))
        try:
            matches = list(queryset.filter(**lookup)[:2])
        except (ValueError, TypeError, DjangoValidationError, ObjectDoesNotExist):
            matches = []  # e.g. "gpu001:x" for a GPU, whose index is a number
        if not matches:
            self.fail("does_not_exist", model=meta.verbose_name, value=echo(data))
        if len(matches) > 1:
            count = queryset.filter(**lookup).count()
            self.fail("ambiguous", count=count, models=meta.verbose_name_plural, value=echo(data))
        return matches[0]

    def to_representation(self, value):
        if isinstance(self.natural_key, str):
            for part in self.natural_key.split("__"):
                value = getattr(value, part)
            return value
        return str(value.public_id)  # no natural key: written and read back as the public id

    def get_choices(self, cutoff=None) -> dict:
        # The browsable API's forms: choices keyed by public id, as the field is written.
        queryset = self.get_queryset()
        if cutoff is not None:
            queryset = queryset[:cutoff]
        return {str(item.public_id): str(item) for item in queryset}


def reference_schema(field: ReferenceField) -> dict:
    if field.natural_key:
        return {"type": "string", "minLength": 1, "description": f"Public id or {field.natural_key_label}."}
    return {"type": "string", "format": "uuid"}


class ReferenceFieldExtension(OpenApiSerializerFieldExtension):
    """Documents a reference as a string both ways: a public id or the natural key in, the natural key out."""

    target_class = ReferenceField

    def map_serializer_field(self, auto_schema, direction):
        if direction == "response" and self.target.natural_key:
            return {"type": "string", "description": self.target.natural_key_label.capitalize() + "."}
        return reference_schema(self.target)


class StrictCharField(serializers.CharField):
    """Text is a JSON string: DRF's CharField would take 5 or true and store "5" or "True"."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


def errors_beyond_shape(refused: Mapping, passed: dict, check: Callable[[dict, set[str]], Mapping]) -> dict:
    """What `check` (the service's own checks, which save nothing) says of `passed`, the values of the fields whose
    shape passed, less the fields in `refused` (the shape's errors, by field): a field refused by its shape keeps that
    message alone, since the check saw no value of it. A door that checks shapes first (a serializer, a form) adds
    these to its own errors, so a request learns every bad field at once (docs/api.md). `check` is also told which
    fields were refused, for a rule that one of them would have met (a subject named, but not found)."""
    found = check(passed, set(refused)) or {}
    return {key: value for key, value in found.items() if key not in refused}


class EveryBadField:
    """A serializer mixin: when some fields are refused by their shape, `errors_beyond_shape` still judges the
    fields that passed and its errors join the answer (errors_beyond_shape above). Define it to call the service's
    check; when every shape passes, the service itself judges the whole request."""

    def errors_beyond_shape(self, passed: dict, refused: set[str]) -> Mapping:
        raise NotImplementedError

    def to_internal_value(self, data):
        try:
            return super().to_internal_value(data)
        except ValidationError as error:
            if not isinstance(error.detail, dict) or not isinstance(data, Mapping):
                raise
            passed = self._fields_that_pass(data, set(error.detail))
            more = errors_beyond_shape(error.detail, passed, self.errors_beyond_shape)
            raise ValidationError({**more, **error.detail}) from None

    def _fields_that_pass(self, data, failed: set[str]) -> dict:
        """The validated values of the fields not in `failed`, keyed as validated_data keys them."""
        attrs: dict = {}
        for field in self._writable_fields:
            if field.field_name in failed:
                continue
            try:
                value = field.run_validation(field.get_value(data))
                if (validate_field := getattr(self, f"validate_{field.field_name}", None)) is not None:
                    value = validate_field(value)
            except (ValidationError, DjangoValidationError, SkipField):
                continue
            self.set_value(attrs, field.source_attrs, value)
        return attrs


class ValidatedModelSerializer(EveryBadField, serializers.ModelSerializer):
    """Runs the model's own validation (clean(), constraints), so the API and the forms refuse the same input.

    Every bad field is reported at once: when some fields fail on their own, the model's checks (uniqueness,
    constraints, field validators) still run over the fields that passed, and their errors join the answer.
    """

    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.CharField: StrictCharField,
        models.TextField: StrictCharField,
    }

    def _candidate(self, attrs: dict):
        model = self.Meta.model
        many_to_many = {field.name for field in model._meta.many_to_many}
        plain = {key: value for key, value in attrs.items() if key not in many_to_many}
        if self.instance is None:
            return model(**plain)
        candidate = model.objects.get(pk=self.instance.pk)
        for key, value in plain.items():
            setattr(candidate, key, value)
        return candidate

    def validate(self, attrs):
        attrs = super().validate(attrs)
        try:
            self._candidate(attrs).full_clean(validate_unique=True)
        except DjangoValidationError as error:
            raise ValidationError(_as_drf_detail(error)) from None
        return attrs

    def errors_beyond_shape(self, passed: dict, refused: set[str]) -> dict:
        """The model's field, uniqueness and constraint checks on what passed. Not clean(): its cross-field rules
        would read the failed fields' defaults and report errors the client did not make."""
        sources = {field.source for field in self._writable_fields if field.field_name in refused}
        exclude = refused | sources | {name for name in self.fields if name not in passed and self.instance is None}
        try:
            candidate = self._candidate(passed)
        except (TypeError, ValueError, ObjectDoesNotExist):
            return {}
        problems: dict = {}
        for check in (candidate.clean_fields, candidate.validate_unique, candidate.validate_constraints):
            try:
                check(exclude=exclude)
            except DjangoValidationError as error:
                for key, messages in _as_drf_detail(error).items():
                    problems.setdefault(key, []).extend(m for m in messages if m not in problems.get(key, []))
        return problems


def _as_drf_detail(error: DjangoValidationError):
    if hasattr(error, "error_dict"):
        return {
            ("non_field_errors" if field == "__all__" else field): [message for message in messages]
            for field, messages in error.message_dict.items()
        }
    return {"non_field_errors": error.messages}


def exception_handler(exc, context):
    """Model validation and integrity errors raised past the serializer still answer 400, never 500."""
    if isinstance(exc, DjangoValidationError):
        exc = ValidationError(_as_drf_detail(exc))
    elif isinstance(exc, DataError):
        # A value the database cannot hold (PostgreSQL refuses a NUL in text, a number past its range): bad input.
        exc = ValidationError({"non_field_errors": [f"a value cannot be stored: {exc}".splitlines()[0][:200]]})
    elif isinstance(exc, IntegrityError):
        exc = ValidationError({"non_field_errors": [f"conflicts with existing data: {exc}".splitlines()[0]]})
    elif isinstance(exc, ValidationError) and isinstance(exc.detail, list):
        # A bare list (e.g. the search filter's "Null characters are not allowed."): the documented shape is an
        # object naming what is wrong, so a client reads every 400 the same way.
        exc = ValidationError({"non_field_errors": exc.detail})
    return drf_exception_handler(exc, context)
