"""The Celery app. Its configuration comes from Django settings (CELERY_* names).

Beat's process also reaps stale jobs itself, in a daemon thread started on `beat_init` (docs/jobs.md, "Worker
loss"): the reap tasks beat sends need a live system worker, and a job must end even when no worker is alive.
"""

import logging
import os
import threading
import time

from celery import Celery
from celery.signals import beat_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

logger = logging.getLogger(__name__)

app = Celery("rackpilot")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def reap_forever(interval: float, *, stop: threading.Event | None = None, also=()) -> None:
    """Reap stale jobs every `interval` s until `stop` is set; `also`: more (callable, period s) to run, e.g. prune.

    Runs in a thread of its own (beat's process, the embedded server); an error is logged and tried again."""
    from django.db import close_old_connections

    from apps.jobs import services

    stop = stop or threading.Event()
    due = {callable_: 0.0 for callable_, _ in also}
    while not stop.wait(interval):
        close_old_connections()
        try:
            services.reap_stale_jobs()
        except Exception:
            logger.exception("the reaper failed; trying again in %s s", interval)
        for callable_, period in also:
            if time.monotonic() < due[callable_]:
                continue
            # Each on its own: one that fails waits its period and is tried again, and never holds back the rest.
            due[callable_] = time.monotonic() + period
            try:
                callable_()
            except Exception:
                logger.exception("%s failed; trying again in %s s", getattr(callable_, "name", callable_), period)


@beat_init.connect
def start_beat_reaper(sender=None, **kwargs) -> threading.Thread | None:
    from django.conf import settings

    if not settings.RACKPILOT_BEAT_REAPER:
        return None
    thread = threading.Thread(
        target=reap_forever,
        args=(float(settings.RACKPILOT_JOB_REAPER_SECONDS),),
        name="rackpilot-beat-reaper",
        daemon=True,
    )
    thread.start()
    logger.info("beat: reaping stale jobs in-process every %s s", settings.RACKPILOT_JOB_REAPER_SECONDS)
    return thread
