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
    # A quarantine of a node under a running training job, waiting for the job's next checkpoint (or its deadline), or
    # a non-critical action waiting for the node's next maintenance window (`act_at`).
    DEFERRED = "deferred", "Deferred"
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


class RepairState(models.TextChoices):
    """A repair's loop: evidence before any reboot, the work, a validation chosen by the fault, then back in service
    through the scheduler (`returning` until the scheduler's resume job says it did). A failed validation goes back to
    repair, a resume the scheduler refused back to `validating` with its passed gate; `closed` is an operator's end
    without a return."""

    OPEN = "open", "Open: evidence not captured yet"
    EVIDENCE_CAPTURED = "evidence_captured", "Evidence captured"
    IN_REPAIR = "in_repair", "In repair"
    VALIDATING = "validating", "Validating"
    RETURNING = "returning", "Returning: the scheduler's resume running"
    RETURNED = "returned", "Validated and returned to service"
    CLOSED = "closed", "Closed without a return"


REPAIR_ACTIVE = (
    RepairState.OPEN,
    RepairState.EVIDENCE_CAPTURED,
    RepairState.IN_REPAIR,
    RepairState.VALIDATING,
    RepairState.RETURNING,  # still in repair until the scheduler has taken the node back
)
REPAIR_COLOURS = {
    RepairState.OPEN: "red",
    RepairState.EVIDENCE_CAPTURED: "orange",
    RepairState.IN_REPAIR: "orange",
    RepairState.VALIDATING: "blue",
    RepairState.RETURNING: "blue",
    RepairState.RETURNED: "green",
    RepairState.CLOSED: "grey",
}


class GateKind(models.TextChoices):
    """The validation a repair must pass, chosen by the fault (apps/remediation/repairs.py, GATE_RULES)."""

    LINK = "link", "Link: NCCL pairwise against a known-good partner, NIC counters read around it"
    GPU = "gpu", "GPU: burn-in under dcgmi diag -r 3, then HBM and NVLink bandwidth (nvbandwidth)"
    ACCEPTANCE = "acceptance", "Unknown fault: the node's whole acceptance (GPU and link checks together)"


class GateState(models.TextChoices):
    RUNNING = "running", "Running"
    PASSED = "passed", "Passed"
    FAILED = "failed", "Failed"


class PartType(models.TextChoices):
    GPU = "gpu", "GPU"
    NIC = "nic", "NIC"
    CABLE = "cable", "Cable"
    OTHER = "other", "Other part (DIMM, PSU, board…)"
