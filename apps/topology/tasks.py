"""Thin Celery tasks of the topology (the system queue): the work is in apps.topology.services."""

from celery import shared_task

from apps.topology.services import record_topology


@shared_task(name="rackpilot.topology.record", ignore_result=True, time_limit=600)
def record() -> bool:
    """On commit of an inventory change, and every minute (what a bulk update changed): record the topology's
    evaluation where the inventory moved since the newest one. Whether it recorded."""
    return record_topology() is not None
