"""Texts for users: what they sent echoed back, bounded (an error message never grows with the input), and counts
with their nouns ("1 node", "3 nodes"), never "node(s)"."""

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


def noun(n: int, word: str, plural: str | None = None) -> str:
    """`word` as it goes with `n` things: `word` for exactly one, else `plural` (`word` + "s" unless given, for
    irregular words: noun(2, "process", "processes"))."""
    return word if n == 1 else (plural or f"{word}s")


def counted(n: int, word: str, plural: str | None = None) -> str:
    """`n` and the noun that goes with it: counted(1, "node") is "1 node", counted(0, "node") "0 nodes",
    counted(3, "trainer process", "trainer processes") "3 trainer processes"."""
    return f"{n} {noun(n, word, plural)}"
