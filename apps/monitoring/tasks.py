"""Thin Celery tasks of monitoring (the system queue): the work is in the modules they name."""

import time

from celery import shared_task

from apps.monitoring import kernel_log, progress, recorder, services, watch
from apps.monitoring.bmc import polling, readings


@shared_task(name="rackpilot.monitoring.poll_bmcs", ignore_result=True, time_limit=120)
def poll_bmcs() -> int:
    """Beat: start the BMC reads of every site that is due."""
    return len(polling.schedule_polls())


@shared_task(name="rackpilot.monitoring.read_bmc_sels", ignore_result=True, time_limit=120)
def read_bmc_sels() -> int:
    """Beat: start the read of the BMCs' event logs (their new records become health events)."""
    return 1 if polling.schedule_sel_reads() else 0


@shared_task(name="rackpilot.monitoring.prune_bmc_readings", ignore_result=True, time_limit=1800)
def prune_bmc_readings() -> int:
    return readings.prune_readings()


@shared_task(name="rackpilot.monitoring.read_training_progress", ignore_result=True, time_limit=120)
def read_training_progress() -> int:
    """Beat: start the log reads of every active training job that is due."""
    return len(progress.schedule_reads())


@shared_task(name="rackpilot.monitoring.record_telemetry", ignore_result=True, time_limit=1800)
def record_telemetry() -> int:
    """Beat, every minute: append the telemetry record's missing steps (apps.monitoring.recorder), then what the
    backfill still lacks (nothing once it is done), then the SLOs' blame; nothing where a Prometheus records."""
    now = time.time()
    recorded = recorder.record_telemetry(until=now) + recorder.backfill(until=now)
    services.record_slo_blame(until=now)  # what drags each SLO, read by the SLOs page
    return recorded


@shared_task(name="rackpilot.monitoring.watch_telemetry", ignore_result=True, time_limit=120)
def watch_telemetry() -> int:
    """Beat, every 30 s: the GPU faults the telemetry reports now, as health events (apps.monitoring.watch)."""
    return len(watch.watch_telemetry())


@shared_task(name="rackpilot.monitoring.read_kernel_logs", ignore_result=True, time_limit=120)
def read_kernel_logs() -> int:
    """Beat, every 5 minutes: one `kernel-log` job over the compute nodes, unless one is still going."""
    return int(kernel_log.schedule_read() is not None)
