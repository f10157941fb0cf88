"""Fan-out: run a list of steps on many nodes, a bounded window of nodes at a time, one session per node.

Knows nothing about jobs: it reports to an observer (step started, a line of output, step finished or skipped).
Cancel is an asyncio.Event: once set, no new command starts and running ones are killed (TERM, then KILL).
"""

import asyncio
import contextlib
import contextvars
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from apps.nodeexec.base import STDOUT, CommandResult, NodeTarget, OutputCollector, Transport, TransportError
from apps.nodeexec.catalogue import shell_join

# A step that is more than one command (check, apply, verify): given the node and `run` (a RunCommand: await
# run(argv, timeout) for a result, output streamed to the cell), returns the cell's result.
StepRunner = Callable[[NodeTarget, "RunCommand"], Awaitable[CommandResult]]


# The running fan-out's cancel event, for a step runner that waits (a reboot waiting for its node to come back).
_cancel: contextvars.ContextVar[asyncio.Event | None] = contextvars.ContextVar("fan_out_cancel", default=None)


async def wait_unless_canceled(seconds: float) -> bool:
    """Sleep `seconds` inside a step runner, ending early when the fan-out is canceled; True: it was canceled."""
    cancel = _cancel.get()
    if cancel is None:
        await asyncio.sleep(seconds)
        return False
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(cancel.wait(), timeout=max(seconds, 0.0))
    return cancel.is_set()


def cancel_event() -> asyncio.Event:
    """The running fan-out's cancel event (a fresh, never-set one outside a fan-out), for a runner's own sessions."""
    return _cancel.get() or asyncio.Event()


@dataclass(frozen=True)
class PlannedStep:
    name: str
    argv: tuple[str, ...]
    timeout: float = 60.0
    stop_on_failure: bool = True
    runner: StepRunner | None = None


class Observer(Protocol):
    def step_started(self, target: NodeTarget, step: PlannedStep) -> None: ...

    def output(self, target: NodeTarget, step: PlannedStep, stream: str, line: str) -> None: ...

    def step_finished(self, target: NodeTarget, step: PlannedStep, result: CommandResult) -> None: ...

    def step_skipped(self, target: NodeTarget, step: PlannedStep, reason: str, *, canceled: bool) -> None: ...


async def fan_out(
    targets: list[NodeTarget],
    steps: list[PlannedStep],
    *,
    transport: Transport,
    observer: Observer,
    cancel: asyncio.Event,
    window: int = 64,
    grace: float = 3.0,
    output_cap: int = 1 << 20,
) -> None:
    _cancel.set(cancel)  # the node workers below are tasks: each copies this context
    queue: asyncio.Queue[NodeTarget] = asyncio.Queue()
    for target in targets:
        queue.put_nowait(target)

    async def worker():
        while True:
            try:
                target = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            await run_node(
                target, steps, transport=transport, observer=observer, cancel=cancel, grace=grace, output_cap=output_cap
            )

    await asyncio.gather(*(worker() for _ in range(max(1, min(window, len(targets))))))
    await transport.aclose()


class NodeConnection:
    """The node's connection for its steps, opened at its first step; reopen() replaces it (after a reboot)."""

    def __init__(self, transport: Transport, target: NodeTarget):
        self.transport, self.target, self.session = transport, target, None

    async def open(self) -> None:
        self.session = await self.transport.open(self.target)

    async def reopen(self) -> None:
        """A new connection, its host key verified as every connection's is; TransportError when none opens."""
        await self.close()
        await self.open()

    async def close(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            with contextlib.suppress(Exception):
                await session.close()


class RunCommand:
    """`await run(argv, timeout)`: one command of a step on the node's session, its output streamed to the cell.
    `await run.reopen()`: a runner whose node rebooted connects again; the node's later steps use the new session."""

    def __init__(self, node: NodeConnection, step: PlannedStep, *, observer, cancel, grace, cap):
        self.node, self.step = node, step
        self.observer, self.cancel, self.grace, self.cap = observer, cancel, grace, cap

    async def __call__(
        self, argv: list[str], timeout: float, *, live: bool = True, cap: int | None = None
    ) -> CommandResult:
        """`live=False`: the output is data (a file as base64), kept up to `cap` bytes but not sent to the cell
        line by line; the command line itself still is."""
        target, step, observer = self.node.target, self.step, self.observer
        if step.runner is not None:  # several commands share the cell: say which one the lines below come from
            observer.output(target, step, STDOUT, f"$ {shell_join(list(argv))}")
        collector = OutputCollector(
            cap=self.cap if cap is None else cap,
            on_line=(lambda stream, line: observer.output(target, step, stream, line)) if live else None,
        )
        return await self.node.session.run(
            list(argv), timeout=timeout, collector=collector, cancel=self.cancel, grace=self.grace
        )

    async def reopen(self) -> None:
        await self.node.reopen()


async def run_node(target, steps, *, transport, observer, cancel, grace, output_cap) -> None:
    """All steps on one node over one session; a failure stops the node's later steps when the step says so."""
    node = NodeConnection(transport, target)
    try:
        for position, step in enumerate(steps):
            if cancel.is_set():
                _skip_rest(observer, target, steps[position:], "canceled before it started", canceled=True)
                return
            observer.step_started(target, step)
            if node.session is None:
                try:
                    await node.open()
                except TransportError as error:
                    result = CommandResult(error=str(error), host_key=error.host_key, fingerprint=error.fingerprint)
                    observer.step_finished(target, step, result)
                    _skip_rest(observer, target, steps[position + 1 :], "node unreachable", canceled=False)
                    return
            run = RunCommand(node, step, observer=observer, cancel=cancel, grace=grace, cap=output_cap)
            if step.runner is not None:
                result = await step.runner(target, run)
            else:
                result = await run(list(step.argv), step.timeout)
            observer.step_finished(target, step, result)
            if result.canceled:
                _skip_rest(observer, target, steps[position + 1 :], "canceled before it started", canceled=True)
                return
            if not result.ok and step.stop_on_failure:
                _skip_rest(observer, target, steps[position + 1 :], f"skipped: {step.name} failed", canceled=False)
                return
    finally:
        await node.close()


def _skip_rest(observer, target, steps, reason, *, canceled) -> None:
    for step in steps:
        observer.step_skipped(target, step, reason, canceled=canceled)
