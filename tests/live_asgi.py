"""The embedded wiring for the browser tests: the ASGI app plus the in-process Celery worker (as `serve` does)."""

from portal.asgi import application  # noqa: F401
from portal.embedded import start_embedded_worker

start_embedded_worker()
