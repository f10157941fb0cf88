"""The sim transport: the catalogue answered by the simulator (apps/simulator registers a backend), and the simulated
BMCs the BMC reads talk to (apps/simulator registers those too), so no production code imports the simulator."""

import asyncio
import functools
import time
from typing import Any, Protocol, runtime_checkable

from apps.nodeexec.base import STDERR, STDOUT, CommandResult, NodeTarget, OutputCollector, TransportError


@runtime_checkable
class SimulatorBackend(Protocol):
    """Answers a catalogue command for a simulated node in the exact format of the real tool.

    `run` is called in a worker thread (it may read the database); `node` carries hostname and node_id.
    It returns (exit_code, stdout, stderr) or (exit_code, stdout, stderr, seconds); str or bytes both do.
    `seconds` is how long the real command would take: the transport waits that long on its event loop (no thread
    held, so 500 nodes sleeping together take the model's time), honouring the step's timeout and cancel.
    A backend may also offer `session(node)`, an object whose run(argv) answers the commands of one connection (so
    that they share what it read of the node), and `shared_reads()`: an object the transport asks for once per
    fan-out and hands to each of its sessions as `session(node, shared)` (so that they share what is the same for
    all of them).
    """

    def run(self, node: NodeTarget, argv: list[str]) -> tuple: ...


_backend: SimulatorBackend | None = None
PACED_CHUNKS = 64


def register_simulator(backend: SimulatorBackend | None) -> None:
    """Install the simulator backend (None removes it). apps.simulator calls this from its AppConfig.ready()."""
    global _backend
    if backend is not None and not isinstance(backend, SimulatorBackend):
        raise TypeError("a simulator backend needs run(node, argv) -> (exit_code, stdout, stderr)")
    _backend = backend


def get_simulator() -> SimulatorBackend | None:
    return _backend


@runtime_checkable
class SimulatedBmcBackend(Protocol):
    """Answers a simulated node's BMC in the real formats: ipmitool's output and Redfish documents, from the node's
    figures at one moment (read once per poll: `node_figures` reads the database, so call it in a thread)."""

    CHASSIS: str  # the Redfish path of the chassis whose documents need the figures

    def node_figures(self, node, *, seed: int, load: float, at) -> Any: ...

    def logged_in(self, user: str, password: str) -> bool: ...

    def ipmitool(self, values, argv: list[str], *, password: str, at, state=None) -> tuple[int, str, str]: ...

    def redfish(
        self, figures, method: str, path: str, *, headers: dict, body, tokens: set, state_at=None
    ) -> tuple[int, dict, bytes]: ...

    # The chassis power and the System Event Log (read and changed in a thread: they are the node's stored state).
    RESET_TARGET: str  # the Redfish path of the System's Reset action
    RESET_TYPES: dict  # ResetType -> the power action it is (on, off, cycle, reset)

    def bmc_state(self, node) -> Any: ...

    def chassis_control(self, node, action: str, *, seed: int = 0) -> None: ...

    # An NVLink switch tray's BMC (Redfish only): its figures at one moment (reads the database: in a thread), and its
    # Redfish service answered from them.
    def switch_tray_figures(self, tray, *, seed: int, load: float, at) -> Any: ...

    def switch_tray_redfish(
        self, figures, method: str, path: str, *, headers: dict, body, tokens: set
    ) -> tuple[int, dict, bytes]: ...


_bmc_backend: SimulatedBmcBackend | None = None


def register_simulated_bmc(backend: SimulatedBmcBackend | None) -> None:
    """Install the simulated BMCs (None removes them). apps.simulator calls this from its AppConfig.ready()."""
    global _bmc_backend
    if backend is not None and not isinstance(backend, SimulatedBmcBackend):
        raise TypeError(
            "simulated BMCs need CHASSIS, node_figures, logged_in, ipmitool, redfish, bmc_state, chassis_control, "
            "switch_tray_figures and switch_tray_redfish"
        )
    _bmc_backend = backend


def simulated_bmc() -> SimulatedBmcBackend:
    if _bmc_backend is None:
        raise TransportError("no simulator is installed (simulated BMCs need apps.simulator)")
    return _bmc_backend


def _bytes(value) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value or b"")


class SimSession:
    def __init__(self, backend: SimulatorBackend, target: NodeTarget, shared=None):
        self.backend, self.target = backend, target
        if not hasattr(backend, "session"):
            opened = None
        else:
            opened = backend.session(target, shared) if shared is not None else backend.session(target)
        self._run = opened.run if opened is not None else functools.partial(backend.run, target)

    async def run(self, argv, *, timeout, collector: OutputCollector, cancel: asyncio.Event, grace: float):
        started = time.monotonic()
        result = CommandResult()
        call = asyncio.ensure_future(asyncio.to_thread(self._run, list(argv)))
        if not await _finished_in_time(call, cancel, timeout):
            result.canceled, result.timed_out = cancel.is_set(), not cancel.is_set()
            return collector.fill(result)
        exit_code, stdout, stderr, *taking = call.result()
        seconds = float(taking[0]) if taking else 0.0
        lines = _bytes(stdout).splitlines(keepends=True)
        # The command takes the model's time (waiting holds no thread), printing its output as it goes: the stdout
        # lines come out spread over the wait, in at most PACED_CHUNKS pieces; stderr at the end.
        pieces = max(1, min(len(lines), PACED_CHUNKS)) if seconds > 0 else 1
        for index in range(pieces):
            if seconds > 0:
                remaining = max(timeout - (time.monotonic() - started), 0.0)
                pause = asyncio.ensure_future(asyncio.sleep(seconds / pieces))
                if not await _finished_in_time(pause, cancel, remaining):
                    result.canceled, result.timed_out = cancel.is_set(), not cancel.is_set()
                    return collector.fill(result)
            for line in lines[len(lines) * index // pieces : len(lines) * (index + 1) // pieces]:
                collector.feed(STDOUT, line)
        for line in _bytes(stderr).splitlines(keepends=True):
            collector.feed(STDERR, line)
        result.exit_code = int(exit_code)
        result.duration = time.monotonic() - started
        return collector.fill(result)

    async def close(self) -> None:
        return None


async def _finished_in_time(work: asyncio.Future, cancel: asyncio.Event, timeout: float) -> bool:
    """Whether `work` finished before the timeout and before a cancel (it is cancelled otherwise)."""
    waiter = asyncio.ensure_future(cancel.wait())
    done, _ = await asyncio.wait({work, waiter}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if work in done:
        return True
    work.cancel()  # a simulated wait ends at once; a thread still answering finishes on its own
    return False


class SimTransport:
    """One per fan-out: its sessions share the backend's shared_reads(), asked for at the first open."""

    name = "sim"

    def __init__(self):
        self._backend, self._shared = None, None

    async def open(self, target: NodeTarget) -> SimSession:
        backend = get_simulator()
        if backend is None:
            raise TransportError("no simulator is installed (the sim transport needs apps.simulator)")
        if backend is not self._backend:  # the first open (or a test installed another backend since)
            self._backend = backend
            self._shared = backend.shared_reads() if hasattr(backend, "shared_reads") else None
        return SimSession(backend, target, self._shared)

    async def aclose(self) -> None:
        return None
