"""What one read request works out once and then asks for again and again (each dashboard panel asks for the
telemetry source, whose model reads the inventory's fingerprint, the workloads and the served-requests ledger).

Kept for that request only, and only for reads: GET and HEAD never write, so nothing kept can go stale while the
request lasts. Outside a request (jobs, commands, tests calling services) every call computes afresh."""

import contextvars
from collections.abc import Callable, Hashable
from typing import TypeVar

T = TypeVar("T")
READ_METHODS = frozenset({"GET", "HEAD"})
_KEPT: contextvars.ContextVar[dict | None] = contextvars.ContextVar("rackpilot_kept_for_this_read", default=None)


def kept_for_this_read(key: Hashable, compute: Callable[[], T]) -> T:
    """compute()'s answer, worked out once per read request (every time outside one)."""
    kept = _KEPT.get()
    if kept is None:
        return compute()
    if key not in kept:
        kept[key] = compute()
    return kept[key]


class ReadScope:
    """Opens a fresh keep for the length of a read request (the middleware's part)."""

    def __init__(self, method: str):
        self.reading = method in READ_METHODS

    def __enter__(self) -> None:
        self.token = _KEPT.set({}) if self.reading else None

    def __exit__(self, *exc) -> None:
        if self.token is not None:
            _KEPT.reset(self.token)
