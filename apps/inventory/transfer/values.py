"""Converting the values of an import to what their model fields hold, strictly, with a message a person can act
on; references and cable ends checked for shape. Values are echoed in messages cut short (apps.core.text.echo)."""

import re
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from apps.core.text import echo
from apps.inventory.transfer.sections import PAIR_TARGETS, SCALAR_TARGETS


class Invalid(Exception):
    """A value that cannot be what its field holds."""


_TEXT_FIELDS = (models.CharField, models.TextField, models.GenericIPAddressField)
_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+")
_BOOLEANS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def convert(model_field: models.Field, value: Any) -> Any:
    """The Python value of a document value. Stricter than to_python(): YAML's `7.10` is a number, not text."""
    if value is None or (value == "" and model_field.null):
        if model_field.null:
            return None
        if isinstance(model_field, _TEXT_FIELDS):
            return ""
        raise Invalid("This field cannot be empty.")
    if isinstance(model_field, models.BooleanField):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _BOOLEANS:
            return _BOOLEANS[value.strip().lower()]
        raise Invalid(f"Enter true or false, not {echo(value)}.")
    if isinstance(model_field, models.DecimalField):
        return convert_decimal(value)
    if isinstance(model_field, models.IntegerField):
        return _in_range(model_field, convert_integer(value))
    if isinstance(model_field, _TEXT_FIELDS):
        if not isinstance(value, str):
            raise Invalid(f"Enter text, not {type(value).__name__} {echo(value)} (in YAML, put it in quotes).")
        return value
    if isinstance(model_field, models.JSONField):
        return value
    try:
        return model_field.to_python(value)
    except ValidationError as error:
        raise Invalid(" ".join(error.messages)) from None


def _in_range(model_field: models.IntegerField, number: int) -> int:
    """The number, if the field can hold it: its own bounds and the database column's (Django adds those to the
    field's validators); checked here so that no later step ever handles a number of thousands of digits."""
    for validator in model_field.validators:
        if isinstance(validator, MinValueValidator | MaxValueValidator):
            try:
                validator(number)
            except ValidationError as error:
                raise Invalid(" ".join(error.messages)) from None
    return number


# More digits than any integer column holds (64 bits: 19 digits); such a number is refused before it is converted.
_MAX_DIGITS = 30


def _short_enough(digits: int) -> None:
    if digits > _MAX_DIGITS:
        raise Invalid(f"A number of {digits} digits is out of range.")


def convert_integer(value: Any) -> int:
    if isinstance(value, bool):
        raise Invalid(f"Enter a whole number, not {echo(value)}.")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value():
        _short_enough(value.adjusted() + 1)  # before int(): 1e999999999 is a few bytes of JSON
        return int(value)
    if isinstance(value, str) and _WHOLE_NUMBER.fullmatch(value.strip()):
        _short_enough(len(value.strip().lstrip("+-").lstrip("0")))
        return int(value)
    raise Invalid(f"Enter a whole number, not {echo(value)}.")


def convert_decimal(value: Any) -> Decimal:
    if isinstance(value, bool):
        raise Invalid(f"Enter a number, not {echo(value)}.")
    try:
        number = (
            Decimal(repr(value))
            if isinstance(value, float)
            else Decimal(value.strip() if isinstance(value, str) else value)
        )
    except (InvalidOperation, TypeError, ValueError):
        raise Invalid(f"Enter a number, not {echo(value)}.") from None
    if not number.is_finite():
        raise Invalid(f"Enter a number, not {echo(value)}.")
    return number


def text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise Invalid(f"Name the {what} as text.")
    return value


def ref_key(target: str, value: Any) -> tuple:
    """The natural key a reference gives, checked for shape only."""
    if target in PAIR_TARGETS:
        label = PAIR_TARGETS[target]
        if not isinstance(value, dict) or set(value) != {"site", "name"}:
            raise Invalid(f"Give the {label} as {{site: <site slug>, name: <{label} name>}}.")
        if not value["site"] or not value["name"]:
            raise Invalid(f"Give both the site and the name of the {label}.")
        return (text(value["site"], "site"), text(value["name"], label))
    return (text(value, SCALAR_TARGETS[target]),)


def end_key(value: Any) -> tuple:
    if isinstance(value, dict) and set(value) == {"node", "nic"}:
        return ("nic", text(value["node"], "node"), text(value["nic"], "NIC"))
    if isinstance(value, dict) and set(value) == {"switch", "port"}:
        return ("switch", text(value["switch"], "switch"), text(value["port"], "port"))
    raise Invalid("Give a cable end as {node: <host name>, nic: <NIC name>} or {switch: <name>, port: <port>}.")


def peer_key(value: Any, hostname: str) -> tuple:
    if isinstance(value, int) and not isinstance(value, bool):
        return (hostname, value)
    if isinstance(value, dict) and set(value) == {"node", "index"}:
        return (text(value["node"], "node"), convert_integer(value["index"]))
    raise Invalid("Give each peer GPU as its index on this node, or as {node: <host name>, index: <n>}.")
