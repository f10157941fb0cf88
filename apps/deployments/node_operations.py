"""Telling the cluster's scheduler that a node is drained or back in service: the commands, the controller they
run on, and starting the `scheduler-action` job (the kind: apps/deployments/kinds/scheduler_action.py).

Runs on the scheduler's controller (a management node with kubectl or scontrol), never on the node itself. The exact
commands are `scheduler_commands()`, shown before the job starts (the job's parameters and its matrix columns).
"""

import shlex

from django.conf import settings
from rest_framework import serializers

from apps.inventory.choices import NodeRole
from apps.inventory.models import Node
from apps.jobs.kinds import StepSpec
from apps.jobs.services import TargetSpec, create_job
from apps.nodeexec.catalogue import (
    CATALOGUE,
    HOSTNAME,
    Command,
    CommandError,
    Placeholder,
    register_command,
    register_placeholder,
)

KIND = "scheduler-action"
SCHEDULERS = ("kubernetes", "slurm")
# Slurm's node and drain reason, as scontrol takes them (Kubernetes' node name is nodeexec's `scheduler_node`). A
# drain reason may hold spaces, so it relies on the transport's shlex quoting; it still admits no quote, $, `, ; | &
# < > or backslash.
SLURM_REASON = r"[A-Za-z0-9 _.,:/#@+=()-]{1,200}"
register_placeholder("slurm_node", Placeholder(rf"NodeName={HOSTNAME}", "NodeName=a node name"))
register_placeholder(
    "slurm_reason", Placeholder(rf"Reason={SLURM_REASON}", "Reason= letters, digits, spaces, . , : / # @ + = ( ) -")
)

COMMANDS = (
    Command(
        "kubectl-cordon",
        ("kubectl", "cordon", "{scheduler_node}"),
        "Mark a Kubernetes node unschedulable.",
        placeholders=("scheduler_node",),
    ),
    Command(
        "kubectl-drain",
        ("kubectl", "drain", "{scheduler_node}", "--ignore-daemonsets", "--delete-emptydir-data"),
        "Evict a Kubernetes node's pods (DaemonSets stay).",
        timeout=900.0,
        placeholders=("scheduler_node",),
    ),
    Command(
        "kubectl-uncordon",
        ("kubectl", "uncordon", "{scheduler_node}"),
        "Make a Kubernetes node schedulable.",
        placeholders=("scheduler_node",),
    ),
    Command(
        "scontrol-drain",
        ("scontrol", "update", "{slurm_node}", "State=DRAIN", "{slurm_reason}"),
        "Drain a Slurm node with a reason.",
        placeholders=("slurm_node", "slurm_reason"),
    ),
    Command(
        "scontrol-resume",
        ("scontrol", "update", "{slurm_node}", "State=RESUME"),
        "Return a Slurm node to service.",
        placeholders=("slurm_node",),
    ),
)
for _command in COMMANDS:
    if _command.name not in CATALOGUE:
        register_command(_command)


def scheduler_steps(*, scheduler: str, action: str, node: str, reason: str = "") -> list[StepSpec]:
    if scheduler == "kubernetes":
        names = ["kubectl-cordon", "kubectl-drain"] if action == "drain" else ["kubectl-uncordon"]
        return [StepSpec(name=name, command=name, values={"scheduler_node": node}) for name in names]
    if action == "drain":
        values = {"slurm_node": f"NodeName={node}", "slurm_reason": f"Reason={reason}"}
        return [StepSpec(name="scontrol-drain", command="scontrol-drain", values=values)]
    return [StepSpec(name="scontrol-resume", command="scontrol-resume", values={"slurm_node": f"NodeName={node}"})]


def scheduler_commands(**spec) -> list[str]:
    """The command lines as the ssh transport sends them (each element shlex-quoted), for the operator to read."""
    return [shlex.join(step.argv()) for step in scheduler_steps(**spec)]


def scheduler_controller():
    """The node the scheduler's commands run on: RACKPILOT_SCHEDULER_CONTROLLER, else the first management node."""
    if settings.RACKPILOT_SCHEDULER_CONTROLLER:
        return Node.objects.filter(hostname=settings.RACKPILOT_SCHEDULER_CONTROLLER).first()
    return Node.objects.filter(role=NodeRole.MANAGEMENT).order_by("hostname").first()


def scheduler_request(node) -> dict:
    """What telling the scheduler about the node's drain state takes: the job's parameters, the commands shown
    before it runs, and the controller they run on (None when the inventory has none)."""
    action = "drain" if node.is_drained else "undrain"
    parameters = {"scheduler": settings.RACKPILOT_SCHEDULER_KIND, "action": action, "node": node.hostname}
    if action == "drain" and parameters["scheduler"] == "slurm":  # kubectl cordon takes no reason
        parameters["reason"] = node.drain_reason
    commands, problem = [], ""
    try:
        commands = scheduler_commands(**parameters)
    except CommandError as error:  # a drain reason the scheduler's command cannot carry
        problem = str(error)
    return {"parameters": parameters, "commands": commands, "problem": problem, "controller": scheduler_controller()}


def start_scheduler_action(*, node, requested_by):
    """Starts the scheduler-action job that matches the node's drain state on the controller; raises
    serializers.ValidationError (nothing created) when there is no controller or a parameter does not pass."""
    planned = scheduler_request(node)
    if planned["controller"] is None:
        raise serializers.ValidationError(
            {"targets": "No scheduler controller: set RACKPILOT_SCHEDULER_CONTROLLER or add a management node."}
        )
    return create_job(
        kind=KIND,
        targets=TargetSpec(nodes=(planned["controller"].hostname,)),
        parameters=planned["parameters"],
        requested_by=requested_by,
    )
