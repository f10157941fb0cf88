"""Database connections of worker threads: a fan-out runs blocking work (the simulator, storing a deployment's
cell) in short-lived threads; Django opens one connection per thread and would keep it until the thread is
collected, so such work gives it back when it is done."""

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection


@contextmanager
def thread_connection_returned() -> Iterator[None]:
    """Run the block, then close this thread's connection (never the main thread's: a request or a test owns it)."""
    try:
        yield
    finally:
        if threading.current_thread() is not threading.main_thread():
            connection.close()
