"""Form and error helpers shared by every app: a service's error detail put on a page's form, by the fields it names,
and its messages for a page or a command."""

from collections.abc import Mapping

from django import forms
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
