from django.db import models


class Scheduler(models.TextChoices):
    SLURM = "slurm", "Slurm"
    KUBERNETES = "kubernetes", "Kubernetes"


class DrainState(models.TextChoices):
    """Whether the scheduler keeps new work off the node: drained (nothing runs), draining (jobs still running)."""

    NONE = "", "In service"
    DRAINING = "draining", "Draining"
    DRAINED = "drained", "Drained"


DRAIN_STATE_COLOURS = {DrainState.NONE: "green", DrainState.DRAINING: "orange", DrainState.DRAINED: "red"}


class DifferenceKind(models.TextChoices):
    """How the scheduler's view of a node differs from what Rackpilot expects (scheduler_differences())."""

    DRAINED_OUTSIDE = "drained_outside", "Drained in the scheduler, in service in Rackpilot"
    NOT_DRAINED = "not_drained", "Drained in Rackpilot, in service in the scheduler"
    DOWN = "down", "Down or not responding in the scheduler"
    CONDITION = "condition", "A node condition in the scheduler reports a problem"
    ABSENT = "absent", "Not known to the scheduler"
