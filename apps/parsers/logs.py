"""Plain-text logs (training runs, launchers, schedulers, kernel logs): each line with what its prefixes say.

A line of a distributed job's log carries prefixes that say where it came from: Ray's ``(WorkerDict pid=N)``,
PyTorch's ``[rank3]:``, mpirun's ``[1,3]<stdout>:``, srun's ``3: ``, pdsh's ``10.0.0.7: ``, NCCL's
``host:pid:tid [dev]``, glog's ``[E0626 06:24:44.9 ProcessGroupNCCL.cpp:616]``, a kernel or syslog time stamp.
``parse_log`` takes them off and keeps the rank, node and GPU they name, so rules (``triage``) read the message and
know where it happened.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .common import Result, split_lines, strip_ansi
from .errors import ParseError

# Bytes that no text log holds: NUL, and the C0 controls other than tab, newline, carriage return, form feed, escape.
BINARY_BYTES = re.compile(rb"[\x00-\x08\x0e-\x1a\x1c-\x1f]")
BINARY_SAMPLE = 8192
BINARY_SHARE = 0.01  # a stray control byte in a long log is tolerated; more than 1% of the sample is not text

RAY_PREFIX = re.compile(r"^\((?P<actor>[\w.\-]+)(?: pid=\d+)?(?:, ip=(?P<ip>[\d.]+))?\) ")
TORCH_RANK_PREFIX = re.compile(r"^\[rank(?P<rank>\d+)\]: ?")
MPIRUN_PREFIX = re.compile(r"^\[\d+,(?P<rank>\d+)\]<std(?:out|err)>: ?")
SRUN_PREFIX = re.compile(r"^\s{0,3}\d{1,5}: (?=\S)")  # srun --label: a task id, not necessarily the training rank
NCCL_PREFIX = re.compile(r"^(?P<host>[^\s:\[\]()]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] ")
GLOG_PREFIX = re.compile(r"^\[?[EWIF]\d{3,4} \d\d:\d\d:\d\d\.\d+ +(?:\d+ )?[\w./\-]+:\d+\] ")
PG_RANK = re.compile(r"^\[(?:PG (?:ID )?\d+ (?:PG GUID \S+ )?)?Rank (?P<rank>\d+)\] ")
KERNEL_STAMP = re.compile(
    r"^(?:\[\s*[+-]?\d+\.\d+\]\s?"  # dmesg, dmesg -H relative
    r"|\[\w{3} \w{3} +\d+ [\d:]+ \d{4}\] "  # dmesg -T
    r"|\w+ *:\w+ *: \d{4}-\d\d-\d\dT[\d:,.]+[+-]\d\d:\d\d "  # dmesg --decode --time-format=iso
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{6}[+-]\d\d:?\d\d "  # dmesg --time-format=iso (a comma: not syslog's)
    r"|\d+,\d+,\d+,[^;]*;"  # /dev/kmsg records
    r"|<\d+>)"
)
SYSLOG_PREFIX = re.compile(
    r"^(?:\w{3} +\d+ [\d:]+|\d{4}-\d\d-\d\dT\S+) (?P<host>[\w.\-]+) (?P<program>[\w.\-/]+)(?:\[\d+\])?: "
)
JOURNAL_KERNEL = re.compile(r"^(?:\w{3} +\d+ [\d:]+ )?kernel: ")  # journalctl -k, with or without --no-hostname
# pdsh and similar fan-out tools put the address they reached in front ('10.0.87.143: '), nested once per hop.
PDSH_PREFIX = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}: ")


@dataclass
class LogLine(Result):
    """One line: ``text`` as written (ANSI colours and trailing blanks removed), ``message`` without the prefixes."""

    line: int
    text: str
    message: str
    rank: int | None = None
    node: str | None = None
    gpu: str | None = None  # the CUDA device index NCCL prints in '[dev]'


@dataclass
class TextLog(Result):
    """A text log read line by line; blank lines are counted but not kept."""

    lines: int
    entries: list[LogLine]
    ranks: list[int]
    nodes: list[str]


def looks_binary(data: bytes) -> bool:
    """True for bytes that are not a text log (an image, an archive, a core dump)."""
    sample = data[:BINARY_SAMPLE]
    if not sample:
        return False
    if b"\x00" in sample:
        return True
    return len(BINARY_BYTES.findall(sample)) > BINARY_SHARE * len(sample)


def decode_log(data: bytes) -> str:
    """Text from an uploaded or read log; ParseError for binary data (the caller names the file)."""
    if looks_binary(data):
        raise ParseError("expected a text log, got binary data", line=None)
    return data.decode("utf-8", errors="replace")


def read_line(number: int, raw: str) -> LogLine:
    """Take the launcher, rank, NCCL, glog and time-stamp prefixes off one line, keeping what they say."""
    text = strip_ansi(raw).rstrip()
    message = text
    rank: int | None = None
    node: str | None = None
    gpu: str | None = None
    for _ in range(8):  # prefixes nest (Ray → torch rank → glog → PG rank); each pass takes one off
        if match := RAY_PREFIX.match(message):
            node = node or match["ip"]
        elif match := TORCH_RANK_PREFIX.match(message) or MPIRUN_PREFIX.match(message):
            rank = int(match["rank"]) if rank is None else rank
        elif match := NCCL_PREFIX.match(message):
            node, gpu = node or match["host"], match["dev"]
        elif match := GLOG_PREFIX.match(message):
            pass
        elif match := PG_RANK.match(message):
            rank = int(match["rank"]) if rank is None else rank
        elif match := KERNEL_STAMP.match(message) or JOURNAL_KERNEL.match(message):
            pass
        elif match := SYSLOG_PREFIX.match(message):
            node = node or match["host"]
        elif match := PDSH_PREFIX.match(message):
            pass  # the address a fan-out tool reached; NCCL's own prefix, when there, names the host
        elif match := SRUN_PREFIX.match(message):
            pass
        else:
            break
        message = message[match.end() :]
    return LogLine(line=number, text=text, message=message.strip(), rank=rank, node=node, gpu=gpu)


def read_lines(text: str) -> list[LogLine]:
    """Every non-blank line of ``text``, numbered from 1 as an editor counts them (a bare carriage return breaks a
    line: each progress-bar update is a line of its own)."""
    return [read_line(number, raw) for number, raw in enumerate(split_lines(text), start=1) if raw.strip()]


def read_file_lines(text: str) -> list[LogLine]:
    """Every non-blank line of ``text`` numbered as ``grep -n`` counts them: only a newline ends a line. A line that
    a bare carriage return overwrites on a terminal (a progress bar's updates) gives one entry per non-blank part,
    each with the line's number and the whole line as its ``text``, so a finding cites the line a user finds."""
    entries = []
    for number, raw in enumerate(text.replace("\r\n", "\n").split("\n"), start=1):
        parts = [part for part in raw.split("\r") if part.strip()]
        whole = strip_ansi(raw).rstrip() if len(parts) > 1 else None
        for part in parts:
            entry = read_line(number, part)
            entry.text = whole or entry.text
            entries.append(entry)
    return entries


def parse_log(text: str) -> TextLog:
    """Any text log; ParseError for empty or binary input (a log must have at least one non-blank line)."""
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise ParseError("expected a text log, got binary data (NUL bytes)", line=line)
    entries = read_lines(text)
    if not entries:
        raise ParseError("expected a text log, got empty input", line=1)
    return TextLog(
        lines=len(entries),
        entries=entries,
        ranks=sorted({entry.rank for entry in entries if entry.rank is not None}),
        nodes=list(dict.fromkeys(entry.node for entry in entries if entry.node)),
    )
