"""API pieces shared by every app: model validation in serializers, and errors that never become 500s."""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError, IntegrityError
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.views import exception_handler as drf_exception_handler


class ValidatedModelSerializer(serializers.ModelSerializer):
    """Runs the model's own validation (clean(), constraints), so the API and the forms refuse the same input."""

    def validate(self, attrs):
        attrs = super().validate(attrs)
        model = self.Meta.model
        many_to_many = {field.name for field in model._meta.many_to_many}
        plain = {key: value for key, value in attrs.items() if key not in many_to_many}
        if self.instance is None:
            candidate = model(**plain)
        else:
            candidate = model.objects.get(pk=self.instance.pk)
            for key, value in plain.items():
                setattr(candidate, key, value)
        try:
            candidate.full_clean(validate_unique=True)
        except DjangoValidationError as error:
            raise ValidationError(_as_drf_detail(error)) from None
        return attrs


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
