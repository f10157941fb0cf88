"""Paths and small assertions shared by the parser tests (no Django, no database)."""

from pathlib import Path

import pytest

from apps.parsers.common import read_input
from apps.parsers.errors import ParseError

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
DATA = Path(__file__).resolve().parent / "data"  # invented inputs, clearly not real tool output
NOT_TOOL_OUTPUT = {"README.md", "SOURCES.md"}


def real(relative: str) -> str:
    return read_input(REAL / relative)


def data(name: str) -> str:
    return read_input(DATA / name)


def real_fixture_paths() -> list[Path]:
    return sorted(path for path in REAL.rglob("*") if path.is_file() and path.name not in NOT_TOOL_OUTPUT)


def assert_parse_error(parser, text: str, line: int, fragment: str = "expected") -> ParseError:
    """The parser rejects ``text`` with a ParseError pointing at ``line`` whose message contains ``fragment``."""
    with pytest.raises(ParseError) as caught:
        parser(text)
    error = caught.value
    assert error.line == line, str(error)
    assert str(error).startswith(f"line {line}: ")
    assert fragment in str(error)
    return error
