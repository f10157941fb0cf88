from django.db import models


class Action(models.TextChoices):
    NOTIFY = "notify", "Notify"
    QUARANTINE = "quarantine", "Quarantine (drain through the scheduler)"
    REBOOT = "reboot", "Reboot (through the scheduler, once its jobs end)"
    REPAIR = "repair", "Open a repair"
    POWER_OFF_TRAYS = "power_off_trays", "Power the rack's trays off through their BMCs"
    POWER_CYCLE = "power_cycle", "Power-cycle through the BMC (a node that no longer answers SSH)"
    GPU_RESET = "gpu_reset", "Reset the GPU (nvidia-smi -r, once the node is drained)"


class Mode(models.TextChoices):
    SHADOW = "shadow", "Shadow (record what it would do)"
    ON = "on", "On"


class Outcome(models.TextChoices):
    WOULD_ACT = "would_act", "Would have acted (shadow)"
    ACTED = "acted", "Acted"
    # A quarantine of a node under a running training job, waiting for the job's next checkpoint (or its deadline).
    DEFERRED = "deferred", "Deferred to the next checkpoint"
    REFUSED = "refused", "Refused"
    FAILED = "failed", "Failed"


# What a fault back after its action escalates to: a reboot that did not hold becomes a quarantine with a repair.
ESCALATION = {
    Action.NOTIFY: Action.NOTIFY,
    Action.REBOOT: Action.QUARANTINE,
    Action.QUARANTINE: Action.QUARANTINE,
    Action.POWER_CYCLE: Action.QUARANTINE,
    Action.GPU_RESET: Action.QUARANTINE,
}
# Actions that take a node out of service: the ones the circuit breaker counts.
TAKES_NODE_OUT = {Action.QUARANTINE, Action.POWER_CYCLE, Action.GPU_RESET}
