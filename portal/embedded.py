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
    """What Celery beat does in the services wiring: reap stale jobs every `interval` s, settle deployments, start
    the BMC reads and training-log reads that are due, prune hourly, run job-template schedules that are due, scan
    for notifications, record telemetry every minute."""
    from django.conf import settings

    from apps.automation import notifications
    from apps.automation import services as automation
    from apps.deployments import recording
    from apps.jobs import services
    from apps.monitoring import bmcs as monitoring
    from apps.monitoring import progress, recorder
    from apps.monitoring.policies import services as policies
    from portal.celery import reap_forever

    reap_forever(
        interval,
        also=[
            (recording.settle_finished_runs, 0),
            (monitoring.schedule_polls, settings.RACKPILOT_BMC_SCHEDULER_SECONDS),
            (services.prune_old_output, 3600),
            (monitoring.prune_readings, 3600),
            (automation.run_due_schedules, 0),  # beat's DatabaseScheduler in the services wiring
            (notifications.scan_events, settings.RACKPILOT_NOTIFY_SCAN_SECONDS),
            (policies.evaluate_all, settings.RACKPILOT_POLICY_EVALUATION_SECONDS),
            (progress.schedule_reads, settings.RACKPILOT_TRAINING_PROGRESS_SECONDS),
            (recorder.record_in_background, 60),  # the telemetry record (and its backfill) on a thread of its own
        ],
    )


def stop_embedded_worker() -> None:
    controller = _started.pop("controller", None)
    if controller is not None:
        controller.stop(in_sighandler=False)
    _started.pop("worker", None)
