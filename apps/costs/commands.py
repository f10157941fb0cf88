"""The catalogue commands power policies run on nodes: set one GPU's power limit (root), and read the limits."""

import shlex

from apps.nodeexec.catalogue import CATALOGUE, Command, build, register_command

SET_LIMIT = "nvidia-smi-power-limit"
READ_LIMITS = "nvidia-smi-power-limits"
# nvidia-smi's own field names; csv,noheader,nounits gives "0, 700.00, 700.00" per GPU.
LIMIT_FIELDS = ("index", "power.limit", "power.max_limit")

COMMANDS = (
    Command(
        SET_LIMIT,
        ("nvidia-smi", "-i", "{gpu_index}", "-pl", "{number}"),
        "Set one GPU's power limit in watts (the driver forgets it at a reboot).",
        timeout=60.0,
        placeholders=("gpu_index", "number"),
        root=True,
    ),
    Command(
        READ_LIMITS,
        ("nvidia-smi", f"--query-gpu={','.join(LIMIT_FIELDS)}", "--format=csv,noheader,nounits"),
        "Each GPU's power limit in force and its highest.",
        timeout=60.0,
    ),
)
for _command in COMMANDS:
    if _command.name not in CATALOGUE:
        register_command(_command)


def set_limit_argv(gpu: int, watts: int) -> list[str]:
    return build(SET_LIMIT, gpu_index=gpu, number=int(watts))


def command_line(argv: list[str]) -> str:
    """As the ssh transport sends it (every element quoted), for the operator to read before approving."""
    return shlex.join(argv)
