"""The local transport: commands run as subprocesses on the worker's own host, each in its own process group.

Given a marker, every command carries RACKPILOT_JOB=<marker> in its environment: `end_marked` finds what a lost
worker left running on this host by it (its children inherit it) and ends their process groups.
"""

import asyncio
import contextlib
import os
import re
import signal
import time

from apps.nodeexec.base import (
    MARKER_ENV,
    MARKER_PATTERN,
    STDERR,
    STDOUT,
    CommandResult,
    NodeTarget,
    OutputCollector,
    pump_lines,
    wait_or_cancel,
)


def check_marker(marker: str | None) -> str | None:
    if marker is not None and not re.fullmatch(MARKER_PATTERN, marker):
        raise ValueError(f"command marker {marker!r} does not match {MARKER_PATTERN}")
    return marker


class LocalSession:
    def __init__(self, marker: str | None = None):
        self.env = {**os.environ, MARKER_ENV: marker} if marker else None

    async def run(self, argv, *, timeout, collector: OutputCollector, cancel: asyncio.Event, grace: float):
        started = time.monotonic()
        result = CommandResult()
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                env=self.env,
            )
        except (FileNotFoundError, PermissionError) as error:
            result.exit_code = 127
            result.error = f"cannot run {argv[0]}: {error.strerror}"
            collector.feed(STDERR, (result.error + "\n").encode())
            return collector.fill(result)
        pumps = asyncio.gather(
            pump_lines(process.stdout, STDOUT, collector), pump_lines(process.stderr, STDERR, collector)
        )
        outcome = await wait_or_cancel(_finish(process, pumps), timeout=timeout, cancel=cancel)
        if outcome != "done":
            result.timed_out, result.canceled = outcome == "timeout", outcome == "cancel"
            await _kill_group(process, grace)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(pumps, 1)
        code = process.returncode
        if code is not None and code < 0:
            result.signal = signal.Signals(-code).name
            code = None
        result.exit_code = code if outcome == "done" else None
        result.duration = time.monotonic() - started
        return collector.fill(result)

    async def close(self) -> None:
        return None


async def _finish(process, pumps):
    await pumps
    await process.wait()


async def _kill_group(process, grace: float) -> None:
    """TERM the command's process group, then KILL it if it is still there after the grace period."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            await asyncio.wait_for(process.wait(), wait)
            return
        except TimeoutError:
            continue


class LocalTransport:
    name = "local"

    def __init__(self, *, marker: str | None = None):
        self.marker = check_marker(marker)

    async def open(self, target: NodeTarget) -> LocalSession:
        return LocalSession(self.marker)

    async def aclose(self) -> None:
        return None


def marked_groups(marker: str) -> set[int]:
    """Process groups on this host with a process whose environment holds RACKPILOT_JOB=<marker> (only processes
    this user may read; never this process's own group)."""
    needle = f"{MARKER_ENV}={check_marker(marker)}".encode()
    groups = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as environ:
                if needle not in environ.read().split(b"\0"):
                    continue
            groups.add(os.getpgid(int(entry.name)))
        except OSError:  # gone meanwhile, or another user's
            continue
    groups.discard(os.getpgrp())
    return groups


def end_marked(marker: str, *, grace: float) -> set[int]:
    """TERM the process groups of `marked_groups(marker)`, KILL what is left after `grace` seconds; returns them."""
    groups = marked_groups(marker)
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while groups and time.monotonic() < deadline and marked_groups(marker) & groups:
        time.sleep(0.1)
    for group in marked_groups(marker) & groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    return groups
