"""What every transport shares: the node it talks to, a command's result, and the session interface."""

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from apps.nodeexec.login import SshLogin

STDOUT, STDERR = "stdout", "stderr"

# Every command a transport starts for a caller that names itself (the jobs engine: "<job public id>:<shard>")
# carries this environment variable, so what a dead worker left running can be found and ended (local: /proc
# scanned in this process; ssh: END_MARKED_SCRIPT on the node). Its value matches MARKER_PATTERN.
MARKER_ENV = "RACKPILOT_JOB"
MARKER_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:-]{0,79}"


@dataclass(frozen=True)
class NodeTarget:
    """Everything a transport needs to reach one node, read from the inventory before the fan-out starts."""

    hostname: str
    address: str
    port: int = 22
    node_id: int | None = None
    trusted_keys: tuple[str, ...] = ()
    revoked_keys: tuple[str, ...] = ()
    login: SshLogin | None = None  # None: the worker's RACKPILOT_SSH_USER and RACKPILOT_SSH_KEY


class TransportError(Exception):
    """The node could not be reached or refused us (the step could not run)."""

    def __init__(self, message: str, *, host_key: str | None = None, fingerprint: str | None = None):
        super().__init__(message)
        self.host_key = host_key
        self.fingerprint = fingerprint


@dataclass
class CommandResult:
    """What a command did. exit_code is None when it never ran, was killed, or timed out."""

    exit_code: int | None = None
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_size: int = 0
    stderr_size: int = 0
    timed_out: bool = False
    canceled: bool = False
    error: str = ""
    host_key: str | None = None
    fingerprint: str | None = None
    duration: float = 0.0
    signal: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not (self.timed_out or self.canceled or self.error)


LineCallback = Callable[[str, str], None]


@dataclass
class OutputCollector:
    """Keeps up to `cap` bytes of each stream, counts the rest, and hands every line to a callback."""

    cap: int
    on_line: LineCallback | None = None
    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    sizes: dict = field(default_factory=lambda: {STDOUT: 0, STDERR: 0})

    def feed(self, stream: str, data: bytes) -> None:
        if not data:
            return
        self.sizes[stream] += len(data)
        buffer = self.stdout if stream == STDOUT else self.stderr
        room = self.cap - len(buffer)
        if room > 0:
            buffer += data[:room]
        if self.on_line is not None:
            self.on_line(stream, data.decode("utf-8", errors="replace").rstrip("\r\n"))

    def fill(self, result: CommandResult) -> CommandResult:
        result.stdout, result.stderr = bytes(self.stdout), bytes(self.stderr)
        result.stdout_size, result.stderr_size = self.sizes[STDOUT], self.sizes[STDERR]
        return result


async def pump_lines(reader, stream: str, collector: OutputCollector) -> None:
    """Read a stream line by line into the collector until it ends."""
    while True:
        line = await reader.readline()
        if not line:
            return
        collector.feed(stream, line)


class Session(Protocol):
    """A connection to one node, reused for all the job's steps on it."""

    async def run(
        self, argv: list[str], *, timeout: float, collector: OutputCollector, cancel: asyncio.Event, grace: float
    ) -> CommandResult: ...

    async def close(self) -> None: ...


class Transport(Protocol):
    name: str

    async def open(self, target: NodeTarget) -> Session: ...

    async def aclose(self) -> None: ...


async def wait_or_cancel(awaitable, *, timeout: float, cancel: asyncio.Event) -> str:
    """Wait for `awaitable`; answer "done", "timeout" or "cancel", whichever comes first."""
    task = asyncio.ensure_future(awaitable)
    canceller = asyncio.ensure_future(cancel.wait())
    try:
        done, _ = await asyncio.wait({task, canceller}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        canceller.cancel()
    if task in done:
        task.result()
        return "done"
    return "cancel" if cancel.is_set() else "timeout"
