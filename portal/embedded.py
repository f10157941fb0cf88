"""The embedded wiring: a Celery worker and the jobs reaper inside the server process (no Redis, no beat).

`serve` calls start_embedded_worker() before it starts uvicorn. With no REDIS_URL the broker is `memory://`
(kombu keeps its queues in this process) and the channel layer is in memory, so the worker must live here.
"""

import logging
import threading

logger = logging.getLogger(__name__)

_started: dict = {}


def start_embedded_worker(*, concurrency: int = 4, reaper_interval: float | None = None) -> threading.Thread:
    """Start (once) a Celery worker with a thread pool, and a reaper/pruner loop, as daemon threads.

    Returns the worker thread. Safe to call twice: the second call returns the running thread.
    """
    if "worker" in _started:
        return _started["worker"]
    from celery.worker import WorkController
    from django.conf import settings

    from portal.celery import app

    if not settings.EMBEDDED:
        logger.warning("start_embedded_worker() with REDIS_URL set: run `celery -A portal worker` and beat instead")

    def run_worker():
        worker = WorkController(
            app=app,
            hostname=f"embedded@{__import__('socket').gethostname()}",
            pool_cls="threads",
            concurrency=concurrency,
            queues=["jobs", "system"],  # one worker here for both queues the services wiring splits
            loglevel="WARNING",
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
            optimization="fair",
        )
        _started["controller"] = worker
        worker.start()

    worker_thread = threading.Thread(target=run_worker, name="rackpilot-embedded-worker", daemon=True)
    worker_thread.start()
    interval = reaper_interval if reaper_interval is not None else settings.RACKPILOT_JOB_REAPER_SECONDS
    reaper_thread = threading.Thread(
        target=_reaper_loop, args=(interval,), name="rackpilot-embedded-reaper", daemon=True
    )
    reaper_thread.start()
    _started["worker"], _started["reaper"] = worker_thread, reaper_thread
    return worker_thread


def _reaper_loop(interval: float) -> None:
    """What Celery beat does in the services wiring: reap stale jobs every `interval` s and run the periodic table's
    tasks (settings.RACKPILOT_PERIODIC_TASKS) as often as beat sends them, here in this process."""
    from portal.celery import reap_forever

    reap_forever(interval, also=periodic_calls())


def periodic_calls() -> list[tuple]:
    """(callable, period s) for the embedded loop: each task of the periodic table but the reap (the loop reaps at
    every pass), then the job-template schedules that are due (beat's DatabaseScheduler in the services wiring)."""
    from django.conf import settings
    from django.utils.module_loading import autodiscover_modules, import_string

    from apps.automation import services as automation
    from portal.celery import app

    # Every app's tasks module, imported here and now: Celery's own discovery may be under way in the embedded
    # worker's thread at this moment, and the registry could then lack a task (the loop died on rackpilot.jobs.prune).
    autodiscover_modules("tasks")
    calls = [
        (import_string(IN_BACKGROUND[name]) if name in IN_BACKGROUND else app.tasks[name], period)
        for name, period in settings.RACKPILOT_PERIODIC_TASKS.items()
        if name != REAP
    ]
    return [*calls, (automation.run_due_schedules, 0)]


REAP = "rackpilot.jobs.reap"
# Periodic work that can take a while (the telemetry record's backfill: a minute at 512 nodes) runs here on a thread
# of its own, so the loop's reaping is never held up behind it.
IN_BACKGROUND = {"rackpilot.monitoring.record_telemetry": "apps.monitoring.recorder.record_in_background"}


def stop_embedded_worker() -> None:
    controller = _started.pop("controller", None)
    if controller is not None:
        controller.stop(in_sighandler=False)
    _started.pop("worker", None)
