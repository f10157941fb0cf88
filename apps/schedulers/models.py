"""The scheduler's own view of each node, as its controller last answered (`scontrol show node` in Slurm, the Node
objects in Kubernetes): one row per node, written on every read; pages and the health API read it."""

from django.db import models

from apps.core.models import TimestampedModel
from apps.inventory.models import Node
from apps.schedulers.choices import DrainState, Scheduler


class SchedulerNodeState(TimestampedModel):
    """A node as the scheduler sees it: its state and flags as the controller prints them, whether it is drained
    and the reason the scheduler holds (who set it, when), and when Rackpilot last read it. In Kubernetes the state
    is the Ready condition (Ready, NotReady, Unknown), the flags SchedulingDisabled (cordoned) and the conditions
    that report a problem, and `taints` / `conditions` hold the node's own as the API server lists them."""

    node = models.OneToOneField(Node, on_delete=models.CASCADE, related_name="scheduler_state")
    scheduler = models.CharField(max_length=16, choices=Scheduler.choices, default=Scheduler.SLURM)
    present = models.BooleanField(default=True, help_text="False: the controller does not know the node.")
    state = models.CharField(max_length=32, blank=True, help_text="The base state: IDLE, ALLOCATED, DOWN, Ready, …")
    flags = models.JSONField(
        default=list, blank=True, help_text="DRAIN, NOT_RESPONDING, REBOOT_REQUESTED, SchedulingDisabled, …"
    )
    taints = models.JSONField(
        default=list, blank=True, help_text="Kubernetes: the node's taints, {key, value, effect, time_added}."
    )
    conditions = models.JSONField(
        default=list, blank=True, help_text="Kubernetes: the node's conditions, {type, status, reason, message, since}."
    )
    drain_state = models.CharField(max_length=16, choices=DrainState.choices, blank=True, default=DrainState.NONE)
    reason = models.CharField(max_length=500, blank=True)
    reason_by = models.CharField(max_length=64, blank=True, help_text="Who set the reason (Slurm's [user@…]).")
    reason_at = models.DateTimeField(null=True, blank=True, help_text="When the reason was set.")
    read_at = models.DateTimeField(help_text="When the controller last answered for the node.")
    read_by_job = models.UUIDField(null=True, blank=True, help_text="The readback job that read it.")

    class Meta:
        ordering = ["node__hostname"]

    def __str__(self) -> str:
        return f"{self.node} {self.get_scheduler_display()}: {self.state_text}"

    @property
    def state_text(self) -> str:
        """IDLE+DRAIN as the controller printed it."""
        return "+".join([self.state, *self.flags]) if self.present else "not in the scheduler"

    @property
    def drained(self) -> bool:
        return self.drain_state != DrainState.NONE

    @property
    def down(self) -> bool:
        if self.scheduler == Scheduler.KUBERNETES:
            return self.present and self.state != "Ready"
        return self.present and (self.state == "DOWN" or "NOT_RESPONDING" in self.flags)

    @property
    def problem_conditions(self) -> list[dict]:
        """Kubernetes: the conditions that report a problem (any but Ready that is True)."""
        return [c for c in self.conditions if c.get("type") != "Ready" and c.get("status") == "True"]
