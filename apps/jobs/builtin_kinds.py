"""The kinds shipped with the engine: shell-check (catalogue commands, output kept) and sleep (cancel/crash tests)."""

from rest_framework import serializers

from apps.jobs.kinds import JobKind, StepSpec, register_kind
from apps.nodeexec.catalogue import PLACEHOLDERS

SHELL_CHECK_COMMANDS = [
    "uname",
    "hostname",
    "uptime",
    "os-release",
    "nvidia-smi-list",
    "nvidia-smi-query",
    "ip-link",
    "lscpu",
    "free",
    "df",
    "true",
]


class ShellCheckParameters(serializers.Serializer):
    commands = serializers.ListField(
        child=serializers.ChoiceField(choices=SHELL_CHECK_COMMANDS),
        default=["uname", "nvidia-smi-list", "ip-link"],
        min_length=1,
        max_length=len(SHELL_CHECK_COMMANDS),
        help_text="Catalogue commands to run on each node, in order.",
    )
    interface = serializers.RegexField(
        rf"^(?:{PLACEHOLDERS['interface'].pattern})\Z",
        required=False,
        help_text="Also show this network interface (ip -j link show dev <interface>).",
        error_messages={"invalid": "Enter a Linux interface name (letters, digits, . _ - : @; up to 15)."},
    )

    def validate_commands(self, value):
        if len(set(value)) != len(value):
            raise serializers.ValidationError("A command is listed twice.")
        return value


@register_kind
class ShellCheck(JobKind):
    name = "shell-check"
    label = "Shell check"
    description = "Runs read-only catalogue commands (uname -a, nvidia-smi -L, ip -j link …) and keeps their output."
    parameters = ShellCheckParameters
    rerun_on_worker_loss = True  # read-only commands; the output of the lost run is dropped with its cells

    def steps(self, parameters: dict) -> list[StepSpec]:
        steps = [StepSpec(name=name, command=name, stop_on_failure=False) for name in parameters["commands"]]
        if parameters.get("interface"):
            steps.append(
                StepSpec(
                    name="ip-link-show",
                    command="ip-link-show",
                    values={"interface": parameters["interface"]},
                    stop_on_failure=False,
                )
            )
        return steps


class SleepParameters(serializers.Serializer):
    seconds = serializers.FloatField(min_value=0, max_value=86400, default=5, help_text="How long each step sleeps.")
    steps = serializers.IntegerField(min_value=1, max_value=20, default=1, help_text="How many sleep steps in a row.")


@register_kind
class Sleep(JobKind):
    name = "sleep"
    label = "Sleep"
    description = "Sleeps on every node; for trying out cancel and crash handling."
    parameters = SleepParameters
    rerun_on_worker_loss = True  # sleeps change nothing on a node

    def steps(self, parameters: dict) -> list[StepSpec]:
        seconds = f"{parameters['seconds']:.3f}".rstrip("0").rstrip(".") or "0"
        return [
            StepSpec(
                name=f"sleep-{n}",
                command="sleep",
                label=f"sleep {seconds} s",
                values={"seconds": seconds},
                timeout=parameters["seconds"] + 60,
            )
            for n in range(1, parameters["steps"] + 1)
        ]
