"""The Slurm commands Rackpilot runs on the scheduler's controller to read node states and to reboot nodes through
Slurm (drain and resume: apps/deployments/node_operations.py). Every value is one argv element checked against its
placeholder: a reason with spaces is one element (`reason=fan swap`), never shell text."""

from apps.nodeexec.catalogue import CATALOGUE, HOSTNAME, Command, Placeholder, register_command, register_placeholder
from apps.parsers.slurm import SINFO_FORMAT

# A drain or reboot reason as Slurm takes it: spaces allowed (the transport quotes the element whole); no quote, $,
# `, ; | & < > or backslash, so the same text reads back unchanged from sinfo's `|`-separated columns.
REASON_CHARACTERS = "A-Za-z0-9 _.,:/#@+=()-"  # what a drain reason may hold: one argv element, never shell text
SLURM_REASON = rf"[{REASON_CHARACTERS}]{{1,200}}"
SLURM_NODE = rf"NodeName={HOSTNAME}"

register_placeholder("slurm_reboot_reason", Placeholder(rf"reason={SLURM_REASON}", "reason= letters, digits, spaces"))

SHOW_NODES = "scontrol-show-nodes"
SHOW_NODE = "scontrol-show-node"
SINFO_NODES = "sinfo-nodes"
REBOOT_ASAP = "scontrol-reboot-asap"

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
)
for _command in COMMANDS:
    if _command.name not in CATALOGUE:
        register_command(_command)
