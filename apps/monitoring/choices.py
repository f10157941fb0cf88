from django.db import models


class BmcProtocol(models.TextChoices):
    IPMI = "ipmi", "IPMI (lanplus)"
    REDFISH = "redfish", "Redfish"


# The port each protocol listens on when a BMC's own is not given.
DEFAULT_PORTS = {BmcProtocol.IPMI: 623, BmcProtocol.REDFISH: 443}


class PollResult(models.TextChoices):
    """How one read of one BMC ended: the label of rackpilot_bmc_polls_total and the node page's badge."""

    OK = "ok", "Read"
    PARTIAL = "partial", "Read in part"  # e.g. sensors read, but the BMC has no power reading
    AUTH_FAILED = "auth_failed", "Credentials refused"
    UNREACHABLE = "unreachable", "Unreachable"
    ERROR = "error", "Error"


POLL_RESULT_COLOURS = {
    PollResult.OK: "green",
    PollResult.PARTIAL: "orange",
    PollResult.AUTH_FAILED: "red",
    PollResult.UNREACHABLE: "red",
    PollResult.ERROR: "purple",
}


class SensorKind(models.TextChoices):
    TEMPERATURE = "temperature", "Temperature"
    FAN = "fan", "Fan"
    POWER = "power", "Power"


class ValidationOutcome(models.TextChoices):
    """A business validation run's verdict, and each of its criteria's."""

    PASS = "pass", "Pass"
    WARN = "warn", "Warn"
    FAIL = "fail", "Fail"
    COULD_NOT_RUN = "could_not_run", "Could not run"


VALIDATION_OUTCOME_COLOURS = {
    ValidationOutcome.PASS: "green",
    ValidationOutcome.WARN: "orange",
    ValidationOutcome.FAIL: "red",
    ValidationOutcome.COULD_NOT_RUN: "purple",
}
# --- cost and energy policies (apps/monitoring/policies) ------------------------------------------------------------


class PolicyKind(models.TextChoices):
    LOW_LOAD_POWER = "low_load_power", "Energy at low load (GPU power limit)"
    ELASTIC_SCALING = "elastic-scaling", "Elastic scaling (an inference service's replicas)"
    SPOT_CAPACITY = "spot-capacity", "Spot capacity (preemptible workloads)"
    STORAGE_TIERING = "storage_tiering", "Storage tiering (idle files to a colder tier)"


# Which kind of workload a row is about (GPU-hours, the spot policy's plan).
WORKLOAD_KINDS = [("training", "Training job"), ("service", "Inference service")]


class PolicyScope(models.TextChoices):
    CLUSTER = "cluster", "Cluster"
    RACK = "rack", "Rack"
    SERVICE = "service", "Inference service"


class PolicyState(models.TextChoices):
    ENABLED = "enabled", "Enabled"  # evaluated on beat's schedule: proposes, applies with standing approval, reverts
    PAUSED = "paused", "Paused"  # dry runs and runs by hand only


POLICY_STATE_COLOURS = {PolicyState.ENABLED: "green", PolicyState.PAUSED: "grey"}


class ActionState(models.TextChoices):
    PROPOSED = "proposed", "Proposed"  # a dry run: what it would do, nothing done
    APPROVED = "approved", "Approved"
    APPLYING = "applying", "Applying"
    APPLIED = "applied", "Applied"
    REVERTING = "reverting", "Reverting"
    REVERTED = "reverted", "Reverted"
    FAILED = "failed", "Failed"  # a run did not finish on every node: revert it (it may be partly in force)
    DISCARDED = "discarded", "Discarded"  # a proposal nobody approved, replaced by a newer dry run


# What may still be on the nodes (and so may be reverted), and what a dry run replaces.
ACTION_IN_FORCE = frozenset({ActionState.APPLYING, ActionState.APPLIED, ActionState.REVERTING, ActionState.FAILED})
ACTION_OPEN = frozenset({ActionState.PROPOSED, ActionState.APPROVED})
ACTION_STATE_COLOURS = {
    ActionState.PROPOSED: "blue",
    ActionState.APPROVED: "blue",
    ActionState.APPLYING: "orange",
    ActionState.APPLIED: "green",
    ActionState.REVERTING: "orange",
    ActionState.REVERTED: "grey",
    ActionState.FAILED: "red",
    ActionState.DISCARDED: "grey",
}


class ApprovalKind(models.TextChoices):
    OPERATOR = "operator", "An operator"
    STANDING = "standing", "Standing approval"


class ActionTrigger(models.TextChoices):
    DRY_RUN = "dry_run", "Dry run"
    EVALUATION = "evaluation", "Periodic evaluation"
