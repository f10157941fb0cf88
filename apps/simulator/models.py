from django.conf import settings
from django.db import models

from apps.core.audit import AuditedModel
from apps.core.models import PublicModel, TimestampedModel
from apps.inventory.models import Node
from apps.simulator.faults.kinds import CHOICES as FAULT_KIND_CHOICES
from apps.simulator.faults.kinds import fault_kind


class SimFaultQuerySet(models.QuerySet):
    def on(self, node: Node) -> "SimFaultQuerySet":
        return self.filter(node=node)


class SimFault(AuditedModel, PublicModel):
    """A fault injected into a simulated node: the tools on that node answer as if it had happened."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="sim_faults")
    kind = models.CharField(max_length=24, choices=FAULT_KIND_CHOICES)
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
        return self.summary  # the audit log and the admin name it as the pages do

    @property
    def colour(self) -> str:
        return fault_kind(self.kind).colour

    @property
    def summary(self) -> str:
        """What this fault is, as a person says it: "gpu027: MTU 1500 on ens1np0"."""
        return f"{self.node.hostname}: {self.sentence}"

    @property
    def sentence(self) -> str:
        """The fault without its node: "MTU 1500 on ens1np0"."""
        return fault_kind(self.kind).describe(self.target, self.parameters)


class SimChangeQuerySet(models.QuerySet):
    def on(self, node: Node) -> "SimChangeQuerySet":
        return self.filter(node=node)


class SimChange(TimestampedModel):
    """A change a command made on a simulated node (an MTU set, a package installed, a file written); it persists.

    Applied after the node's faults; `key` says what changed (see apps.simulator.changes), `value` is its JSON value.
    """

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="sim_changes")
    key = models.CharField(max_length=255)
    value = models.JSONField()

    objects = SimChangeQuerySet.as_manager()

    class Meta:
        ordering = ["node__hostname", "key"]
        verbose_name = "simulated change"
        constraints = [
            models.UniqueConstraint(fields=["node", "key"], name="simchange_unique_key_per_node"),
        ]

    def __str__(self) -> str:
        return f"{self.node.hostname} {self.key}"


class SimServingLoad(models.Model):
    """What a simulated inference service's endpoint served in one whole second (apps.simulator.serving): generated
    and prompt tokens, requests finished and their latency buckets, in the ledger's column order.

    Written by the process serving the endpoints (`serve_sim_exporters`), read by every process's telemetry model, so
    the load a test put on a service shows in its counters, GPU utilisation and energy wherever they are read.
    Compact on purpose, like BMC readings: no public id, no audit (a load test writes one row per second).
    """

    service = models.CharField(max_length=100)
    second = models.BigIntegerField(help_text="Unix time, whole seconds.")
    values = models.JSONField()

    class Meta:
        ordering = ["service", "second"]
        verbose_name = "simulated serving load"
        constraints = [
            models.UniqueConstraint(fields=["service", "second"], name="simservingload_unique_second"),
        ]

    def __str__(self) -> str:
        return f"{self.service} at {self.second}"
