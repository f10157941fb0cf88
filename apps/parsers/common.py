"""Helpers shared by every parser: result base class, value cleaning, line handling, JSON loading."""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
from pathlib import Path
from typing import Any

from .errors import IncompleteOutput, ParseError

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")

# Spellings the tools use for "no value here".
NOT_AVAILABLE = {
    "",
    "-",
    "n/a",
    "[n/a]",
    "na",
    "not supported",
    "[not supported]",
    "not available",
    "not found",
    "unknown error",
    "[unknown error]",
    "requested functionality has been deprecated",
    "none",
}

TRUE_WORDS = {"yes", "true", "enabled", "enable", "on", "active", "1"}
FALSE_WORDS = {"no", "false", "disabled", "disable", "off", "not active", "0"}

# mpirun --tag-output ("[1,0]<stdout>:") and srun --label ("0: ") put these in front of every line.
# mpirun --tag-output, srun --label, pdsh (the address it reached, once per hop)
LAUNCHER_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\s*\d+: |(?:\d{1,3}(?:\.\d{1,3}){3}: )+)")


@dataclasses.dataclass
class Result:
    """Base for every typed result; ``to_dict`` gives plain JSON-able data."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def strip_ansi(text: str) -> str:
    return ANSI_ESCAPE.sub("", text)


def split_lines(text: str) -> list[str]:
    """Lines as `grep -n` and editors number them: split at LF only, the CR of a CR LF ending dropped. A bare CR (a
    progress bar redrawing its line) stays inside its line, so a cited line number is the one `grep -n` shows. Every
    parser splits with this, never ``str.splitlines()``, which also breaks at CR, VT, FF, FS/GS/RS, NEL and U+2028."""
    return [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]


def strip_launcher_prefix(line: str) -> str:
    return LAUNCHER_PREFIX.sub("", line, count=1)


def is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in NOT_AVAILABLE)


def clean(value: str | None) -> str | None:
    """A stripped string, or None for the tools' N/A spellings."""
    if is_missing(value):
        return None
    return value.strip()


def to_float(value: Any) -> float | None:
    """The leading number of a value such as '700.00 W' or '143771 MiB'; None when absent."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if is_missing(value):
        return None
    match = NUMBER.match(str(value).strip())
    return float(match.group()) if match else None


def to_int(value: Any) -> int | None:
    """Like to_float but integral; hex such as '0x1F' is read too."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lower().startswith("0x"):
        try:
            return int(value.strip(), 16)
        except ValueError:
            return None
    number = to_float(value)
    return int(number) if number is not None else None


def to_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if is_missing(value):
        return None
    word = str(value).strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    return None


def shorten(line: str, limit: int = 60) -> str:
    """A line quoted for an error message."""
    line = line.strip()
    return repr(line if len(line) <= limit else line[: limit - 3] + "...")


def first_content_index(lines: list[str]) -> int | None:
    for index, line in enumerate(lines):
        if line.strip():
            return index
    return None


def require_content(text: str, expected: str) -> list[str]:
    """The input's lines; ParseError on empty input."""
    lines = split_lines(text)
    if first_content_index(lines) is None:
        raise ParseError(f"expected {expected}, got empty input", line=1)
    return lines


def unexpected(lines: list[str], expected: str) -> ParseError:
    """A ParseError pointing at the first non-blank line."""
    index = first_content_index(lines)
    if index is None:
        return ParseError(f"expected {expected}, got empty input", line=1)
    return ParseError(f"expected {expected}, got {shorten(lines[index])}", line=index + 1)


def end_of_input(lines: list[str], expected: str) -> ParseError:
    """A ParseError for output that stops before the data (a header and nothing after it)."""
    last = max((index for index, line in enumerate(lines) if line.strip()), default=0)
    return ParseError(f"expected {expected}, got end of input", line=last + 2)


def last_content_line(lines: list[str]) -> int:
    """1-based number of the last non-blank line (1 for blank input)."""
    return max((index for index, line in enumerate(lines) if line.strip()), default=0) + 1


def incomplete(lines: list[str], message: str, partial: object = None, line: int | None = None) -> IncompleteOutput:
    """An IncompleteOutput for output that stops before what it declares; by default it points past the last
    non-blank line, where the missing part should have begun."""
    return IncompleteOutput(message, line if line is not None else last_content_line(lines) + 1, partial)


def load_json(text: str, expected: str) -> Any:
    """Parse JSON, turning decoder errors into ParseError with the line number."""
    if not text.strip():
        raise ParseError(f"expected {expected}, got empty input", line=1)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"expected {expected}: {exc.msg}", line=exc.lineno) from None


def load_json_after_preamble(text: str, expected: str) -> tuple[Any, list[str]]:
    """JSON that may follow warning lines (dcgmi prints them); returns the data and those lines."""
    lines = split_lines(text)
    for index, line in enumerate(lines):
        if line.strip().startswith(("{", "[")):
            body = "\n".join(lines[index:])
            try:
                return json.loads(body), [raw.strip() for raw in lines[:index] if raw.strip()]
            except json.JSONDecodeError as exc:
                raise ParseError(f"expected {expected}: {exc.msg}", line=index + exc.lineno) from None
    raise unexpected(lines, expected)


def require_dict(data: Any, expected: str) -> dict:
    if not isinstance(data, dict):
        raise ParseError(f"expected {expected} (a JSON object), got {type(data).__name__}", line=1)
    return data


def decode_bytes(data: bytes) -> str:
    """Text from raw bytes; gzip is unpacked first (profiler traces are often .json.gz)."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.decode("utf-8", errors="replace")


def read_input(path: str | Path) -> str:
    return decode_bytes(Path(path).read_bytes())


def parse_id_list(text: str | None) -> list[int] | None:
    """A Linux id list such as CPUs '0-31,64-95' or NUMA nodes '0,3-9,11-17' → every id in it; None for N/A or for
    text that is not such a list."""
    text = clean(text)
    if text is None:
        return None
    cpus: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            start, end = part.split("-", 1)
            if not (start.isdigit() and end.isdigit()):
                return None
            cpus.extend(range(int(start), int(end) + 1))
        elif part.isdigit():
            cpus.append(int(part))
        else:
            return None
    return cpus
