from django.conf import settings
from django.db import models

from apps.core.audit import AuditedModel
from apps.core.models import PublicModel
from apps.inventory.models import Node
from apps.simulator.choices import FAULT_KIND_COLOURS, FaultKind


class SimFaultQuerySet(models.QuerySet):
    def on(self, node: Node) -> "SimFaultQuerySet":
        return self.filter(node=node)


class SimFault(AuditedModel, PublicModel):
    """A fault injected into a simulated node: the tools on that node answer as if it had happened."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="sim_faults")
    kind = models.CharField(max_length=24, choices=FaultKind.choices)
    target = models.CharField(
        max_length=255, blank=True, help_text="GPU index, NIC name, PFC priority, mount point or file, by kind."
    )
    parameters = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="sim_faults"
    )

    objects = SimFaultQuerySet.as_manager()

    class Meta:
        ordering = ["node__hostname", "kind", "target"]
        verbose_name = "simulated fault"
        constraints = [
            models.UniqueConstraint(
                fields=["node", "kind", "target"],
                name="simfault_unique_kind_target_per_node",
                violation_error_message="This node already has this fault on this target.",
            ),
        ]

    def __str__(self) -> str:
        where = f" {self.target}" if self.target else ""
        return f"{self.node.hostname} {self.kind}{where}"

    @property
    def colour(self) -> str:
        return FAULT_KIND_COLOURS[self.kind]
