"""Job kinds: small declarative classes the engine runs without knowing what they are for.

A kind names itself, declares its parameters as a DRF serializer (so bad input answers 400 naming the field and the
schema documents it), lists its steps (catalogue commands) for given parameters, and may say what a finished cell
records (JobKind.cell_record). Register one with `@register_kind`; feature apps do so from their AppConfig.ready()
(import the app's `kinds` module or package). docs/jobs.md is the whole contract: hooks, order, threads, transactions.

The engine's own kinds close this module: shell-check (read-only catalogue commands, output kept) and sleep (cancel
and crash tests).
"""

import datetime
import decimal
import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from rest_framework import serializers

from apps.core.text import counted
from apps.jobs.choices import StepStatus
from apps.nodeexec import catalogue
from apps.nodeexec.base import CommandResult, NodeTarget
from apps.nodeexec.transports import TRANSPORT_NAMES


@dataclass(frozen=True)
class StepSpec:
    """One column of the matrix: a catalogue command (with its placeholder values) run on every target node."""

    name: str
    command: str
    label: str = ""
    values: dict = field(default_factory=dict)
    timeout: float | None = None
    stop_on_failure: bool = True

    def argv(self) -> list[str]:
        # A step without a command is run by its kind (JobKind.step_runner): several commands in one cell.
        return catalogue.build(self.command, **self.values) if self.command else []

    def timeout_seconds(self) -> float:
        if self.timeout is not None or not self.command:
            return self.timeout or 3600.0
        return catalogue.get_command(self.command).timeout


@dataclass(frozen=True)
class CellRecord:
    """What the engine records for a finished cell: its status, one-line summary, and extra data for the cell's
    finished event (pushed live with it: verdicts, suggestions)."""

    status: str
    summary: str = ""
    data: dict = field(default_factory=dict)


def default_status(result: CommandResult) -> str:
    """canceled, error (the command could not run at all), succeeded (exit 0) or failed."""
    if result.canceled:
        return StepStatus.CANCELED
    if result.error and result.exit_code is None:
        return StepStatus.ERROR
    return StepStatus.SUCCEEDED if result.ok else StepStatus.FAILED


def default_summary(step: StepSpec, result: CommandResult) -> str:
    """The transport's error, canceled, the timeout or signal, else the first line of output (`exit N: ` when not 0)."""
    if result.error:
        return result.error
    if result.canceled:
        return "canceled"
    if result.timed_out:
        return f"timed out after {step.timeout_seconds():g} s"
    if result.signal:
        return f"killed by SIG{result.signal}"
    text = (result.stdout or result.stderr).decode("utf-8", errors="replace").strip()
    first = text.splitlines()[0] if text else ""
    prefix = "" if result.exit_code == 0 else f"exit {result.exit_code}: "
    return (prefix + first)[:300]


class NoParameters(serializers.Serializer):
    pass


class JobKind:
    """Subclass, set the class attributes, implement steps(); override cell_record() and the other hooks when needed."""

    name: ClassVar[str]
    label: ClassVar[str] = ""
    description: ClassVar[str] = ""
    parameters: ClassVar[type[serializers.Serializer]] = NoParameters
    transports: ClassVar[tuple[str, ...]] = TRANSPORT_NAMES
    default_transport: ClassVar[str | None] = None  # None: nodeexec.transports.default_transport(offered=transports)
    # True only when running a shard's steps again on the same nodes does no harm (read-only commands, results
    # written idempotently): a shard whose worker was lost is then re-queued to a live worker, its cells reset to
    # pending (RACKPILOT_JOB_WORKER_LOSS_RERUNS times at most). False: it ends "worker lost" (docs/jobs.md).
    rerun_on_worker_loss: ClassVar[bool] = False
    # Where a kind that carries an approval starts (a deployment's run, an approved power or tiering action, a
    # runbook phase of an incident), said to whoever tries elsewhere. Set: the kind starts only through that object's
    # service, and POST /api/jobs/, the new-job page and job templates refuse it (400 naming `kind`), so nothing the
    # object would have asked approval for runs without it. Empty: anyone who may start jobs may start it.
    started_through: ClassVar[str] = ""
    # The output is the content of files a user named (a training job's log, its checkpoint listings): it is kept
    # only as the step's artifacts, which only operators and admins read, never streamed as log events every role
    # reads. Such a kind never runs over `local` (the worker's own files): register_kind refuses the pair.
    private_output: ClassVar[bool] = False
    # What the kind's devices (JobKind.devices) are, as the job's texts count them: "9 switch trays".
    device_noun: ClassVar[str] = "device"

    def steps(self, parameters: dict) -> list[StepSpec]:
        raise NotImplementedError

    def check_nodes(self, nodes: list, parameters: dict) -> None:
        """Called by create_job with the resolved nodes (inventory Nodes) and validated parameters, before anything is
        stored: raise serializers.ValidationError({"targets": [...]}) to refuse them (a reboot of a node in service)."""

    def devices(self, nodes: list, parameters: dict) -> list[str]:
        """Called by create_job with the resolved nodes and validated parameters: the names of targets that are no
        inventory node (an NVLink switch tray's BMC, read from the worker's host), each a row of the matrix whose
        cells have no node; with some, the job may have no node at all. Default: none."""
        return []

    @classmethod
    def counted_targets(cls, nodes: int, devices: int = 0) -> str:
        """What a job of this kind runs on, in words: "3 nodes", "9 switch trays", "3 nodes and 9 switch trays"."""
        if not devices:
            return counted(nodes, "node")
        text = counted(devices, cls.device_noun)
        return f"{counted(nodes, 'node')} and {text}" if nodes else text

    def cell_record(self, target: NodeTarget, step: StepSpec, result: CommandResult) -> CellRecord:
        """What a finished cell records. Called on the fan-out's event loop, once per cell that ran (not for skipped
        ones): no database access here, and return quickly. Default: default_status() and default_summary()."""
        return CellRecord(status=default_status(result), summary=default_summary(step, result))

    def prepare(self, job, shard) -> None:
        """Called in the worker's sync context before the shard's fan-out: read what step runners will need."""

    def step_runner(self, step: StepSpec):
        """None: the step runs its catalogue command. Otherwise an async (target, run) -> CommandResult that runs
        several commands in the step's cell (apps.nodeexec.fanout.StepRunner)."""
        return None

    def shard_finished(self, job, shard) -> None:
        """Called once a shard's commands are over and recorded, in the worker's sync context: read the cells'
        artifacts here to parse and record what the commands found (discovery, acceptance verdicts). Report with
        apps.jobs.events.emit()."""

    def job_finished(self, job) -> None:
        """Called once when the job has its final status (after commit): update what depends on the whole run."""

    @classmethod
    def validate(cls, data: dict | None) -> dict:
        """Validated parameters, or serializers.ValidationError keyed by parameter name."""
        if data is not None and not isinstance(data, dict):
            raise serializers.ValidationError({"non_field_errors": ["Parameters must be an object."]})
        serializer = cls.parameters(data=data or {})
        serializer.is_valid(raise_exception=True)
        unknown = set(data or {}) - set(serializer.fields)
        if unknown:
            raise serializers.ValidationError({name: ["Unknown parameter."] for name in sorted(unknown)})
        return _jsonable(dict(serializer.validated_data))


def _jsonable(value):
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, uuid.UUID | datetime.date | decimal.Decimal):
        return str(value)
    return value


KINDS: dict[str, type[JobKind]] = {}


def register_kind(cls: type[JobKind]) -> type[JobKind]:
    if not getattr(cls, "name", None):
        raise TypeError(f"{cls.__name__} needs a name")
    if cls.private_output and "local" in cls.transports:
        raise TypeError(f"{cls.name} reads files users name: it may not run over local (the worker's own host)")
    if cls.name in KINDS and KINDS[cls.name] is not cls:
        raise ValueError(f"job kind {cls.name!r} is already registered by {KINDS[cls.name].__module__}")
    KINDS[cls.name] = cls
    return cls


def output_is_private(name: str) -> bool:
    """Whether jobs of this kind keep file content a user pointed at (JobKind.private_output): operators+ only."""
    return name in KINDS and KINDS[name].private_output


def get_kind(name: str) -> JobKind:
    try:
        return KINDS[name]()
    except KeyError:
        raise LookupError(f"unknown job kind {name!r}") from None


def kind_names() -> list[str]:
    """The registered kinds, as the API schema lists them (apps register theirs as they load)."""
    return sorted(KINDS)


def startable_kind_names() -> list[str]:
    """The kinds a job may be started as directly (POST /api/jobs/, the new-job page, a job template): all but the
    ones that start only through the object holding their approval (JobKind.started_through)."""
    return [name for name in sorted(KINDS) if not KINDS[name].started_through]


def not_startable_message(kind: str) -> str:
    """Why a kind that starts only through its approved object is refused where jobs are started directly."""
    return f"{kind} jobs start only through {KINDS[kind].started_through}, which holds their approval."


def kind_choices() -> list[tuple[str, str]]:
    """The kinds offered where a job is started directly."""
    return [(name, KINDS[name].label or name) for name in startable_kind_names()]


# --- the engine's own kinds -------------------------------------------------------------------------------------

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
        rf"^(?:{catalogue.PLACEHOLDERS['interface'].pattern})\Z",
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
