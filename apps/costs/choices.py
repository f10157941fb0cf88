"""The choices of cost and energy policies: kinds, scopes, states of a policy and of its actions."""

from django.db import models


class PolicyKind(models.TextChoices):
    LOW_LOAD_POWER = "low_load_power", "Energy at low load (GPU power limit)"
    ELASTIC_SCALING = "elastic-scaling", "Elastic scaling (an inference service's replicas)"
    SPOT_CAPACITY = "spot-capacity", "Spot capacity (preemptible workloads)"
    STORAGE_TIERING = "storage_tiering", "Storage tiering (idle files to a colder tier)"


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
