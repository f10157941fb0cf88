"""The local transport: commands run as subprocesses on the worker's own host, each in its own process group."""

import asyncio
import contextlib
import os
import signal
import time

from apps.nodeexec.base import STDERR, STDOUT, CommandResult, NodeTarget, OutputCollector, pump_lines, wait_or_cancel


class LocalSession:
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

    async def open(self, target: NodeTarget) -> LocalSession:
        return LocalSession()

    async def aclose(self) -> None:
        return None
