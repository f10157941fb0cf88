"""Prometheus's targets follow the inventory and the workloads: a change to a node, a GPU or a service rewrites
them once its transaction commits."""

import logging

from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save

from apps.inventory.models import Gpu, Node
from apps.monitoring.targets import write_targets
from apps.workloads.models import InferenceService

logger = logging.getLogger(__name__)


def _rewrite(**kwargs) -> None:
    def write():
        try:
            write_targets()
        except OSError:  # a read-only folder must not fail the change that triggered it
            logger.exception("could not write Prometheus's targets")

    transaction.on_commit(write)


def connect() -> None:
    for model in (Node, Gpu, InferenceService):
        post_save.connect(_rewrite, sender=model, dispatch_uid=f"monitoring-targets-save-{model.__name__}")
        post_delete.connect(_rewrite, sender=model, dispatch_uid=f"monitoring-targets-delete-{model.__name__}")
    m2m_changed.connect(_rewrite, sender=InferenceService.nodes.through, dispatch_uid="monitoring-targets-m2m")
