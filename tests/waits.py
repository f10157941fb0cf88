"""How long the suite waits for a process it started to listen, or for a thing to happen: a bound on a hang, never a
speed. A loaded CI machine (two CPU burners beside four test workers and their servers) took over 30 s to start
uvicorn, and a fixture that gave up waiting and went on had its test fail with "Connection refused"."""

import socket
import time
from collections.abc import Callable

HANG_S = 180


def until(ready: Callable[[], bool], *, what: str, seconds: float = HANG_S, exited: Callable[[], bool] = lambda: False):
    """Polls `ready` until it is true; raises RuntimeError naming `what` if `exited` says the process is gone, or after
    `seconds` (a hang)."""
    deadline = time.monotonic() + seconds
    while not ready():
        if exited():
            raise RuntimeError(f"{what}: the process exited")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not after {seconds:g} s")
        time.sleep(0.05)


def listening(host: str, port: int) -> bool:
    """Whether something accepts connections on host:port now."""
    try:
        socket.create_connection((host, port), timeout=0.2).close()
    except OSError:
        return False
    return True
