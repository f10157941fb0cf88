"""The catalogue commands the runbooks add (the others they run are the inventory's, discovery's and deployments')."""

from apps.deployments import commands as deployment_commands  # noqa: F401  (read-file, dmesg, set-mtu, set-qos)
from apps.nodeexec.catalogue import CATALOGUE, Command, register_command

COMMANDS = (
    Command(
        "tail-log",
        ("tail", "-n", "{number}", "{path}"),
        "The last lines of a log file (a training job's launcher log).",
        placeholders=("number", "path"),
    ),
    Command(
        "ethtool-stats",
        ("ethtool", "-S", "{interface}"),
        "A NIC's counters (drops, pause frames per priority, CRC errors, link-down events).",
        placeholders=("interface",),
    ),
)
for _command in COMMANDS:
    if _command.name not in CATALOGUE:
        register_command(_command)
