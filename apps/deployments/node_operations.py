"""Telling the cluster's scheduler that a node is drained or back in service: the commands, the controller they
run on, and starting the `scheduler-action` job (the kind: apps/deployments/kinds/scheduler_action.py).

Runs on the scheduler's controller (a management node with kubectl or scontrol), never on the node itself. The exact
commands are `scheduler_commands()`, shown before the job starts (the job's parameters and its matrix columns).
"""

import shlex

from django.conf import settings
from rest_framework import serializers

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
from apps.schedulers.commands import (
    KUBE_NODE,
    KUBE_TAINT,
    KUBE_UNTAINT,
    REBOOT_ASAP,
    SHOW_NODE,
    SLURM_REASON,
    quarantine_taint,
    quarantine_value,
)
from apps.schedulers.services import scheduler_controller

KIND = "scheduler-action"
SCHEDULERS = ("kubernetes", "slurm")
ACTIONS = ("drain", "undrain", "reboot")  # reboot: Slurm's `scontrol reboot ASAP nextstate=RESUME`
# Slurm's node and drain reason, as scontrol takes them (Kubernetes' node name is nodeexec's `scheduler_node`). A
# drain reason may hold spaces, so it relies on the transport's shlex quoting; it still admits no quote, $, `, ; | &
# < > or backslash (SLURM_REASON, with the readback and reboot commands: apps/schedulers/commands.py).
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


VERIFY = "verify"  # the step that reads the node back from the controller after the action


def kubernetes_steps(*, action: str, node: str, reason: str = "") -> list[StepSpec]:
    """Quarantine in Kubernetes: cordon, taint (`rackpilot.io/quarantine=<reason>:NoSchedule`, so the reason is on
    the node for anyone to read), then drain; back in service: the taint removed, then uncordon. The node is read
    back (`kubectl get node NODE -o json`) after either, and that read decides."""
    on = {"scheduler_node": node}
    verify = StepSpec(name=VERIFY, command=KUBE_NODE, label="read back", values=on)
    if action == "drain":
        return [
            StepSpec(name="kubectl-cordon", command="kubectl-cordon", values=on),
            StepSpec(
                name=KUBE_TAINT, command=KUBE_TAINT, values={**on, "k8s_quarantine_taint": quarantine_taint(reason)}
            ),
            StepSpec(name="kubectl-drain", command="kubectl-drain", values=on),
            verify,
        ]
    # A node cordoned without Rackpilot's taint answers "not found" to its removal: the uncordon runs all the same.
    return [
        StepSpec(name=KUBE_UNTAINT, command=KUBE_UNTAINT, values=on, stop_on_failure=False),
        StepSpec(name="kubectl-uncordon", command="kubectl-uncordon", values=on),
        verify,
    ]


def scheduler_steps(*, scheduler: str, action: str, node: str, reason: str = "") -> list[StepSpec]:
    """The commands of one action. Each is checked: the node is read back from the controller after the action
    (`scontrol show node -o NODE`, `kubectl get node NODE -o json`), and that read decides whether the scheduler did
    what was asked."""
    if scheduler == "kubernetes":
        return kubernetes_steps(action=action, node=node, reason=reason)
    verify = StepSpec(name=VERIFY, command=SHOW_NODE, label="read back", values={"scheduler_node": node})
    if action == "drain":
        values = {"slurm_node": f"NodeName={node}", "slurm_reason": f"Reason={reason}"}
        return [StepSpec(name="scontrol-drain", command="scontrol-drain", values=values), verify]
    if action == "reboot":
        values = {"scheduler_node": node, "slurm_reboot_reason": f"reason={reason}"}
        return [StepSpec(name=REBOOT_ASAP, command=REBOOT_ASAP, values=values), verify]
    # A resume Slurm answers "Invalid node state specified" may still have cleared the drain (a node whose slurmd
    # does not answer): the read back decides, so it runs whatever the resume said.
    resume = StepSpec(
        name="scontrol-resume",
        command="scontrol-resume",
        values={"slurm_node": f"NodeName={node}"},
        stop_on_failure=False,
    )
    return [resume, verify]


def scheduler_commands(**spec) -> list[str]:
    """The command lines as the ssh transport sends them (each element shlex-quoted), for the operator to read."""
    return [shlex.join(step.argv()) for step in scheduler_steps(**spec)]


def scheduler_request(node) -> dict:
    """What telling the scheduler about the node's drain state takes: the job's parameters, the commands shown
    before it runs, and the controller they run on (None when the inventory has none)."""
    action = "drain" if node.is_drained else "undrain"
    parameters = {"scheduler": settings.RACKPILOT_SCHEDULER_KIND, "action": action, "node": node.hostname}
    if action == "drain" and parameters["scheduler"] == "kubernetes":
        # The quarantine taint's value: what a label value holds of the drain reason, whatever else it held.
        parameters["reason"] = quarantine_value(node.drain_reason)
    elif action == "drain":
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
