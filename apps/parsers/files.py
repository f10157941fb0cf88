"""Files on a node: `find … -printf '%s %A@ %p\\n'` (size, access time, path per file) and `lsof -F pcfn` (which
processes hold which files open), as the storage-tiering policy reads them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .common import Result
from .errors import ParseError

# GNU find's %s (bytes), %A@ (seconds since the epoch with a fraction), %p (the path as found, unescaped).
FIND_LINE = re.compile(r"(?P<size>\d+) (?P<atime>\d+(?:\.\d+)?) (?P<path>/.*)")


@dataclass
class FoundFile(Result):
    path: str
    size_bytes: int
    atime: float


@dataclass
class FileListing(Result):
    files: list[FoundFile] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(found.size_bytes for found in self.files)


def parse_find_printf(text: str) -> FileListing:
    """One file per line. A path holding a newline cannot be told apart from the next line, so the command excludes
    such names (`! -name '*<newline>*'`) and any line not of the form is refused rather than guessed at."""
    listing = FileListing()
    # LF only, as split_lines does, but a CR before it is kept: it may end a real file name
    for number, line in enumerate(text.split("\n"), start=1):
        if not line:
            continue
        match = FIND_LINE.fullmatch(line)
        if match is None:
            raise ParseError(f"not a find -printf '%s %A@ %p' line: {line[:80]!r}", number)
        listing.files.append(FoundFile(match["path"], int(match["size"]), float(match["atime"])))
    return listing


@dataclass
class OpenFile(Result):
    path: str
    pid: int
    command: str
    descriptor: str


@dataclass
class OpenFiles(Result):
    files: list[OpenFile] = field(default_factory=list)

    @property
    def paths(self) -> set[str]:
        return {open_file.path for open_file in self.files}


def parse_lsof_fields(text: str) -> OpenFiles:
    """lsof -F pcfn: a `p<pid>` line opens each process's set, `c<command>` names it, then `f<descriptor>` and
    `n<name>` pairs follow for each file. Other field letters (lsof adds some on its own) are skipped."""
    found = OpenFiles()
    pid, command, descriptor = None, "", ""
    for number, line in enumerate(text.split("\n"), start=1):
        if not line:
            continue
        tag, value = line[0], line[1:]
        if tag == "p":
            if not value.isdigit():
                raise ParseError(f"lsof -F: a process id is a number, not {value!r}", number)
            pid, command, descriptor = int(value), "", ""
        elif pid is None:
            raise ParseError("lsof -F: a field before the first process (p) line", number)
        elif tag == "c":
            command = value
        elif tag == "f":
            descriptor = value
        elif tag == "n":
            found.files.append(OpenFile(value, pid, command, descriptor))
    return found
