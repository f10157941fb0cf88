"""Echoing what a user sent back to them, bounded: an error message never grows with the input."""

import reprlib
from typing import Any

ECHO_LIMIT = 60

# reprlib bounds nested values level by level, so a huge structure is never rendered whole before being cut.
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxdict, _REPR.maxlist, _REPR.maxtuple, _REPR.maxset = 2, 4, 6, 6, 6
_REPR.maxstring = _REPR.maxother = ECHO_LIMIT + 2


def echo(value: Any, limit: int = ECHO_LIMIT) -> str:
    """`value` as a message quotes it (repr(), so a newline shows as `\\n`), cut to `limit` characters with an
    ellipsis: `'aaaa…'`. A huge whole number is described by its length (str() refuses past 4300 digits)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4 * limit:
        return f"a number of {int(value.bit_length() * 0.30103) + 1} digits"
    text = _REPR.repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cut(text: str, limit: int = ECHO_LIMIT) -> str:
    """`text` itself (no quotes), cut to `limit` characters with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
