"""Prometheus's targets and rules follow the inventory, the workloads and the SLOs: a change to a node, a GPU or a
service rewrites them once its transaction commits, a change to an SLO its rules (an SLO's rules name its nodes)."""

import logging

from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save

from apps.inventory.models import Gpu, Node
from apps.monitoring.models import Slo
from apps.monitoring.rule_files import write_and_reload
from apps.monitoring.targets import write_targets
from apps.workloads.models import InferenceService, TrainingJobNode

logger = logging.getLogger(__name__)


def _after_commit(*writes) -> None:
    """Run the writes once the transaction commits; a folder that cannot be written must not fail the change."""

    def write():
        try:
            for one in writes:
                one()
        except OSError:
            logger.exception("could not write Prometheus's targets or rules")

    transaction.on_commit(write)


def _rewrite(**kwargs) -> None:
    _after_commit(write_targets, write_and_reload)


def _rewrite_rules(**kwargs) -> None:
    _after_commit(write_and_reload)


def connect() -> None:
    for model in (Node, Gpu, InferenceService):
        post_save.connect(_rewrite, sender=model, dispatch_uid=f"monitoring-targets-save-{model.__name__}")
        post_delete.connect(_rewrite, sender=model, dispatch_uid=f"monitoring-targets-delete-{model.__name__}")
    m2m_changed.connect(_rewrite, sender=InferenceService.nodes.through, dispatch_uid="monitoring-targets-m2m")
    for model in (Slo, TrainingJobNode):  # a training job's SLO names the job's nodes
        post_save.connect(_rewrite_rules, sender=model, dispatch_uid=f"monitoring-rules-save-{model.__name__}")
        post_delete.connect(_rewrite_rules, sender=model, dispatch_uid=f"monitoring-rules-delete-{model.__name__}")
