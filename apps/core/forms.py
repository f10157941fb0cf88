"""Form helpers shared by every app: a service's error detail put on a page's form, by the fields it names, and its
messages for a page or a command; and the fields the pages share."""

from collections.abc import Mapping
from datetime import UTC, datetime

from django import forms
from django.core.exceptions import ValidationError
from django.forms.utils import pretty_name


def add_service_errors(form: forms.Form, detail, *, aliases: Mapping[str, str] | None = None) -> None:
    """Put a service's ValidationError detail ({"parameters": {"seconds": [...]}, "targets": [...]}) on the form. A key
    that names a field (or, through `aliases`, the field that stands for it) gets its messages there, a nested
    object's as `name: message` (the names the field's JSON holds). Anything else goes above the form after what it
    is in words ("Targets: …"): the form's error list never shows a code's name (templates/core/partials/
    form_errors.html)."""
    if not isinstance(detail, Mapping):
        form.add_error(None, " ".join(str(message) for message in flat_messages(detail)))
        return
    aliases = aliases or {}
    for key, messages in detail.items():
        field = aliases.get(key, key)
        if field in form.fields:
            if isinstance(messages, Mapping):
                for name, inner in messages.items():
                    form.add_error(field, f"{name}: {' '.join(str(m) for m in flat_messages(inner))}")
            else:
                form.add_error(field, " ".join(str(m) for m in flat_messages(messages)))
        elif key == "non_field_errors":
            form.add_error(None, " ".join(str(m) for m in flat_messages(messages)))
        else:
            form.add_error(None, f"{pretty_name(str(key))}: {' '.join(str(m) for m in flat_messages(messages))}")


def flat_messages(value):
    """Every message in a DRF error detail (nested dicts and lists), prefixed by the names it sits under."""
    if isinstance(value, dict):
        for name, inner in value.items():
            for item in flat_messages(inner):
                yield f"{name}: {item}"
    elif isinstance(value, list | tuple):
        for item in value:
            yield from flat_messages(item)
    else:
        yield value


def form_problems(form) -> str:
    """A form's errors in one line for a flash message, each field's after its label ("Until (UTC): …"), never the
    code's name: what core/partials/form_errors.html lists, for a form the page does not show again."""
    problems = [str(error) for error in form.non_field_errors()]
    problems += [f"{field.label}: {' '.join(field.errors)}" for field in form if field.errors]
    return "; ".join(problems)


UTC_DATETIME_SHOWN = "%Y-%m-%d %H:%M"
# As pages write times, with seconds or without; the "T" is what ISO 8601 and a browser's picker write, the "Z" says
# UTC as the label does.
UTC_DATETIME_FORMATS = ("%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S")


class UtcDateTimeField(forms.DateTimeField):
    """A date and time typed as pages print them, YYYY-MM-DD HH:MM, in UTC: a browser's datetime-local picker shows
    the browser's locale format (mm/dd/yyyy, a.m./p.m.) and says nothing of the time zone. The label should say
    "(UTC)"; an input that does not read is an error naming the field."""

    widget = forms.DateTimeInput(
        format=UTC_DATETIME_SHOWN,
        attrs={
            "placeholder": "YYYY-MM-DD HH:MM",
            "pattern": r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2})?Z?",
            "size": 16,
        },
    )

    def __init__(self, *, label=None, help_text="", **kwargs):
        super().__init__(label=label, help_text=help_text or "YYYY-MM-DD HH:MM, in UTC.", **kwargs)
        # The error lists put the field's label before it (core/partials/form_errors.html): the message names no field.
        self.error_messages["invalid"] = "Write a UTC time as YYYY-MM-DD HH:MM, e.g. 2027-03-31 14:30."

    def prepare_value(self, value):
        # Shown in UTC, as it is read back (Django's own shows the current time zone's).
        if isinstance(value, datetime) and value.tzinfo is not None:
            return value.astimezone(UTC)
        return value

    def to_python(self, value):
        if value in self.empty_values:
            return None
        if isinstance(value, datetime):
            return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        text = str(value).strip().removesuffix("Z")
        for layout in UTC_DATETIME_FORMATS:
            try:
                return datetime.strptime(text, layout).replace(tzinfo=UTC)
            except ValueError:
                continue
        raise ValidationError(self.error_messages["invalid"], code="invalid")
