"""Thin Celery task of the remediation app: the work is in apps.remediation.services."""

from celery import shared_task
from django.utils import timezone

from apps.core.audit import audit_context
from apps.core.choices import ChangeSource
from apps.remediation import repairs, services


@shared_task(name="rackpilot.remediation.evaluate", ignore_result=True, time_limit=120)
def evaluate() -> int:
    """Beat's periodic pass of the remediation policies over the open health events, then of the quarantines
    waiting for a training job's checkpoint, then of the returns whose scheduler job's end was not heard."""
    now = timezone.now()
    with audit_context(source=ChangeSource.SYSTEM):
        made = len(services.evaluate(now=now)) + len(services.settle_deferred(now=now))
        return made + len(repairs.settle_returns())
