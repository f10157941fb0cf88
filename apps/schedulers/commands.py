"""The Slurm and Kubernetes commands Rackpilot runs on the scheduler's controller to read node states, to reboot
nodes through Slurm and to taint a quarantined node in Kubernetes (drain and resume, cordon and uncordon:
apps/deployments/node_operations.py). Every value is one argv element checked against its placeholder: a reason with
spaces is one element (`reason=fan swap`), never shell text."""

import re

from apps.nodeexec.catalogue import CATALOGUE, HOSTNAME, Command, Placeholder, register_command, register_placeholder
from apps.parsers.slurm import SINFO_FORMAT

# A drain or reboot reason as Slurm takes it: spaces allowed (the transport quotes the element whole); no quote, $,
# `, ; | & < > or backslash, so the same text reads back unchanged from sinfo's `|`-separated columns.
REASON_CHARACTERS = "A-Za-z0-9 _.,:/#@+=()-"  # what a drain reason may hold: one argv element, never shell text
SLURM_REASON = rf"[{REASON_CHARACTERS}]{{1,200}}"
SLURM_NODE = rf"NodeName={HOSTNAME}"

register_placeholder("slurm_reboot_reason", Placeholder(rf"reason={SLURM_REASON}", "reason= letters, digits, spaces"))

# Kubernetes' quarantine: the node is cordoned and carries this taint, its value the reason cut down to what a
# label value may hold (63 characters of letters, digits, `-`, `_`, `.`, starting and ending alphanumeric).
QUARANTINE_KEY = "rackpilot.io/quarantine"
QUARANTINE_EFFECT = "NoSchedule"
LABEL_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)"
register_placeholder(
    "k8s_quarantine_taint",
    Placeholder(
        rf"{re.escape(QUARANTINE_KEY)}={LABEL_VALUE}:{QUARANTINE_EFFECT}",
        f"{QUARANTINE_KEY}=<a label value>:{QUARANTINE_EFFECT}",
    ),
)


def quarantine_value(reason: str) -> str:
    """The reason as a taint value: each run of other characters becomes one `-`, cut to 63, trimmed to start and
    end alphanumeric; `rackpilot` when nothing is left."""
    text = re.sub(r"[^A-Za-z0-9_.]+", "-", reason)[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", text) or "rackpilot"


def quarantine_taint(reason: str) -> str:
    return f"{QUARANTINE_KEY}={quarantine_value(reason)}:{QUARANTINE_EFFECT}"


SHOW_NODES = "scontrol-show-nodes"
SHOW_NODE = "scontrol-show-node"
SINFO_NODES = "sinfo-nodes"
REBOOT_ASAP = "scontrol-reboot-asap"
KUBE_NODES = "kubectl-get-nodes"
KUBE_NODE = "kubectl-get-node"
KUBE_TAINT = "kubectl-taint-quarantine"
KUBE_UNTAINT = "kubectl-untaint-quarantine"

COMMANDS = (
    Command(SHOW_NODES, ("scontrol", "show", "node", "-o"), "Every node's Slurm state and reason, one per line."),
    Command(
        SHOW_NODE,
        ("scontrol", "show", "node", "-o", "{scheduler_node}"),
        "One node's Slurm state and reason.",
        placeholders=("scheduler_node",),
    ),
    Command(SINFO_NODES, ("sinfo", "-N", "-h", "-o", SINFO_FORMAT), "Every node's sinfo state, time, user, reason."),
    Command(
        REBOOT_ASAP,
        ("scontrol", "reboot", "ASAP", "nextstate=RESUME", "{slurm_reboot_reason}", "{scheduler_node}"),
        "Reboot a Slurm node once its running jobs end (drained meanwhile), then return it to service.",
        placeholders=("slurm_reboot_reason", "scheduler_node"),
    ),
    Command(KUBE_NODES, ("kubectl", "get", "nodes", "-o", "json"), "Every Kubernetes node: taints, conditions."),
    Command(
        KUBE_NODE,
        ("kubectl", "get", "node", "{scheduler_node}", "-o", "json"),
        "One Kubernetes node: cordon, taints, conditions.",
        placeholders=("scheduler_node",),
    ),
    Command(
        KUBE_TAINT,
        ("kubectl", "taint", "nodes", "{scheduler_node}", "{k8s_quarantine_taint}", "--overwrite"),
        "Taint a Kubernetes node as quarantined, the reason in the taint's value.",
        placeholders=("scheduler_node", "k8s_quarantine_taint"),
    ),
    Command(
        KUBE_UNTAINT,
        ("kubectl", "taint", "nodes", "{scheduler_node}", f"{QUARANTINE_KEY}:{QUARANTINE_EFFECT}-"),
        "Remove Rackpilot's quarantine taint from a Kubernetes node.",
        placeholders=("scheduler_node",),
    ),
)
for _command in COMMANDS:
    if _command.name not in CATALOGUE:
        register_command(_command)
