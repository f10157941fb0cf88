"""Discovery results: what each node reported (a facts snapshot per job) and where it differs from the inventory."""

from django.conf import settings
from django.db import models

from apps.core.models import PublicModel, TimestampedModel
from apps.discovery.choices import DIFFERENCE_STATE_COLOURS, NODE_FIXES, DifferenceState, ObjectType


class DifferenceQuerySet(models.QuerySet):
    def open(self) -> "DifferenceQuerySet":
        return self.filter(state=DifferenceState.OPEN)

    def filled(self) -> "DifferenceQuerySet":
        return self.filter(state=DifferenceState.FILLED)

    def visible_to(self, user) -> "DifferenceQuerySet":
        # Every signed-in role reads discovery results, as it reads jobs.
        if user is None or not user.is_authenticated:
            return self.none()
        return self


class Difference(PublicModel):
    """One fact where a node disagrees with the inventory, found by a discovery job; an operator decides it.

    `filled` rows record facts the inventory did not hold yet (empty UUID, no firmware row) and that discovery wrote
    in directly; the other states are decisions: `accepted` updated the inventory, `dismissed` left it as it was.
    """

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="discovery_differences")
    node = models.ForeignKey("inventory.Node", on_delete=models.CASCADE, related_name="discovery_differences")
    object_type = models.CharField(max_length=16, choices=ObjectType.choices)
    object_key = models.CharField(max_length=64, blank=True, help_text='Which object: "GPU3", "ens1np0", "bios".')
    field = models.CharField(max_length=32, help_text="The fact that differs, e.g. mtu, uuid, version, present.")
    expected = models.CharField(max_length=255, blank=True, help_text="What the inventory holds.")
    discovered = models.CharField(max_length=255, blank=True, help_text="What the node reported.")
    note = models.CharField(max_length=300, blank=True, help_text="Why it matters, or what accepting does.")
    state = models.CharField(max_length=16, choices=DifferenceState.choices, default=DifferenceState.OPEN)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="discovery_decisions"
    )
    decided_at = models.DateTimeField(null=True, blank=True)

    objects = DifferenceQuerySet.as_manager()

    class Meta:
        ordering = ["node__hostname", "object_type", "object_key", "field", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["job", "node", "object_type", "object_key", "field"], name="difference_unique_per_job"
            ),
        ]
        indexes = [models.Index(fields=["node", "state"], name="difference_node_state_idx")]

    def __str__(self) -> str:
        where = f" {self.object_key}" if self.object_key else ""
        return f"{self.node.hostname}{where} {self.field}: {self.expected or '—'} → {self.discovered or '—'}"

    @property
    def colour(self) -> str:
        return DIFFERENCE_STATE_COLOURS[DifferenceState(self.state)]

    @property
    def is_open(self) -> bool:
        return self.state == DifferenceState.OPEN

    @property
    def node_fix_step(self) -> str:
        """The deployment step that makes the node match the inventory here; "" when none does."""
        return NODE_FIXES.get((self.object_type, self.field), "")


class NodeFacts(TimestampedModel):
    """What one node reported in one discovery job, parsed: the snapshot differences are judged against."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="discovery_facts")
    node = models.ForeignKey("inventory.Node", on_delete=models.CASCADE, related_name="discovery_facts")
    facts = models.JSONField(default=dict, blank=True, help_text="Parsed facts per family (gpus, nics, cpu, ...).")
    could_not_run = models.JSONField(
        default=dict, blank=True, help_text="Fact family (or family:interface) → why it could not be read."
    )
    notes = models.JSONField(default=list, blank=True, help_text="Observations that are not differences (drift).")

    class Meta:
        ordering = ["node__hostname", "-created"]
        verbose_name_plural = "node facts"
        constraints = [models.UniqueConstraint(fields=["job", "node"], name="nodefacts_unique_per_job")]

    def __str__(self) -> str:
        return f"{self.node.hostname} facts of {self.job_id}"

    @property
    def complete(self) -> bool:
        return not self.could_not_run


__all__ = ["Difference", "NodeFacts", "ObjectType"]
