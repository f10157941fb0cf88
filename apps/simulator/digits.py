"""Numbers as the real tools and the fault form read them: ASCII digits only.

str.isdigit() and int() also take '²', '٣' and '３' (int("٣") is 3; int("²") raises), while strtoul in C, which the
real tools use, reads only 0-9.
"""

import re

WHOLE_NUMBER = re.compile(r"[0-9]+")
INTEGER = re.compile(r"-?[0-9]+")
DECIMAL_NUMBER = re.compile(r"([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")


def is_whole_number(text: str) -> bool:
    return WHOLE_NUMBER.fullmatch(text) is not None


def whole_number(text: str) -> int:
    """The value of ASCII digits; ValueError for anything else (a sign, a space, other digits)."""
    if not is_whole_number(text):
        raise ValueError(f"not a whole number in ASCII digits: {text!r}")
    return int(text)


def integer(text: str) -> int:
    """Like whole_number, with an optional minus sign."""
    if INTEGER.fullmatch(text) is None:
        raise ValueError(f"not an integer in ASCII digits: {text!r}")
    return int(text)


def decimal_number(text: str) -> float:
    """The value of ASCII digits with an optional decimal point; ValueError for anything else."""
    if DECIMAL_NUMBER.fullmatch(text) is None:
        raise ValueError(f"not a decimal number in ASCII digits: {text!r}")
    return float(text)
