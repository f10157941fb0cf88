"""Thin Celery tasks of cost policies (the system queue): the work is in apps.costs.services."""

from celery import shared_task

from apps.costs import services


@shared_task(name="rackpilot.costs.evaluate_cost_policies", ignore_result=True, time_limit=600)
def evaluate_cost_policies() -> int:
    """Beat: evaluate every cost policy (propose, apply with standing approval, revert on a breach, re-apply)."""
    return services.evaluate_all()
