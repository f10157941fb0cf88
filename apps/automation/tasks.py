"""Thin tasks on the system queue (SYSTEM_TASKS): a schedule's tick (sent by beat from its PeriodicTask), the
notification scan (beat, every RACKPILOT_NOTIFY_SCAN_SECONDS) and one delivery attempt."""

from celery import shared_task

from apps.automation import notifications, services


@shared_task(name="rackpilot.automation.run_schedule", ignore_result=True, time_limit=300)
def run_schedule(schedule_public_id: str) -> str:
    run = services.run_schedule_tick(schedule_id=schedule_public_id)
    return run.status if run else "not claimed"


@shared_task(name="rackpilot.automation.scan_events", ignore_result=True, time_limit=300)
def scan_events() -> int:
    return notifications.scan_events()


@shared_task(name="rackpilot.automation.deliver", ignore_result=True, time_limit=120)
def deliver(delivery_public_id: str) -> str:
    return notifications.deliver(delivery_id=delivery_public_id)
