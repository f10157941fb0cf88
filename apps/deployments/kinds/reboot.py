"""The `reboot` job kind: reboot a node, wait for it to go away and come back over SSH, then check it.

A node operation, as `scheduler-action` (scheduler_action.py) is; deployments run it after a step that only takes
effect at the next boot (a driver change, a firmware flash). Per node, one matrix column each:

1. `before`: the boot id (`cat /proc/sys/kernel/random/boot_id`) and `uptime`;
2. `reboot`: `systemctl reboot` (root: `sudo -n --` for a sudo login); the connection closing under it counts as done;
3. `down`: new connections until the node stops answering (or already answers with another boot id), at most
   `down_timeout_seconds`;
4. `up`: new connections, waiting `poll_seconds` and half as long again after each try (30 s at most), until it
   answers over SSH, at most `up_timeout_seconds`. Each connection verifies the host key against the node's trusted
   keys, as every connection does: a node that comes back with another key fails the cell with the transport's
   `HOST KEY CHANGED` message at once, and the key is never trusted automatically;
5. `check`: the boot id must have changed, and `nvidia-smi -L` must list the GPUs the inventory expects.

A node that is not drained is refused when the job is created unless `force` is set: a reboot ends whatever runs on
it, and drained is how an operator says nothing should. `reboot_plan()` is what the node page shows before it runs.
"""

import contextlib
import time
from dataclasses import dataclass

from rest_framework import serializers

from apps.jobs.choices import StepStatus
from apps.jobs.kinds import CellRecord, JobKind, StepSpec, default_status, default_summary, register_kind
from apps.nodeexec.base import CommandResult, NodeTarget, OutputCollector, TransportError
from apps.nodeexec.catalogue import CATALOGUE, Command, build, register_command, shell_join
from apps.nodeexec.fanout import cancel_event, wait_unless_canceled
from apps.nodeexec.transports import get_transport

KIND = "reboot"
BOOT_ID = "boot-id"
REBOOT = "systemctl-reboot"
GPU_LIST = "nvidia-smi-list"
MAX_POLL_SECONDS = 30.0
UNREACHABLE_EXIT = 255  # what ssh exits with when it cannot reach the node (and the simulator while it reboots)

for _command in (
    Command(BOOT_ID, ("cat", "/proc/sys/kernel/random/boot_id"), "The kernel's id of this boot (new at every boot)."),
    Command(REBOOT, ("systemctl", "reboot"), "Reboot the node.", root=True),
):
    if _command.name not in CATALOGUE:
        register_command(_command)


class RebootParameters(serializers.Serializer):
    force = serializers.BooleanField(
        default=False, help_text="Reboot nodes that are not drained too (a reboot ends whatever runs on them)."
    )
    down_timeout_seconds = serializers.IntegerField(
        min_value=5, max_value=3600, default=300, help_text="How long a node may keep answering after the command."
    )
    up_timeout_seconds = serializers.IntegerField(
        min_value=5, max_value=7200, default=900, help_text="How long a node may take to answer over SSH again."
    )
    poll_seconds = serializers.FloatField(
        min_value=0.1,
        max_value=MAX_POLL_SECONDS,
        default=5.0,
        help_text="The first wait between connection tries; each later one is half as long again, 30 s at most.",
    )


def reboot_plan(parameters: dict) -> list[tuple[str, str]]:
    """(step label, what it runs) in order, the commands as the ssh transport sends them, for the operator to read."""
    boot_id, gpus = shell_join(build(BOOT_ID)), shell_join(build(GPU_LIST))
    return [
        ("Boot id and uptime", f"{boot_id}; {shell_join(build('uptime'))}"),
        ("Reboot", f"{shell_join(build(REBOOT))} (as sudo -n -- {shell_join(build(REBOOT))} for a sudo login)"),
        (
            "Down",
            f"new connections running {boot_id} until none answers, {parameters['down_timeout_seconds']} s at most",
        ),
        (
            "Up",
            f"new connections every {parameters['poll_seconds']:g} s and longer until one answers with a trusted host "
            f"key, {parameters['up_timeout_seconds']} s at most (a changed key fails the node)",
        ),
        ("Check", f"{boot_id} (must differ from before); {gpus} (the GPUs the inventory expects)"),
    ]


def reboot_after_fix_commands() -> list[str]:
    """What a deployment step's fix runs after its own commands when it needs a reboot (shown for approval)."""
    defaults = RebootKind.validate({})
    return [
        shell_join(build(BOOT_ID)),
        shell_join(build(REBOOT)),
        f"wait for the node to stop answering ({defaults['down_timeout_seconds']} s at most) and to answer over SSH "
        f"with a trusted host key ({defaults['up_timeout_seconds']} s at most), then verify",
    ]


@dataclass(frozen=True)
class Probe:
    """One connection try: `answered` with `boot_id`, or not, with the transport's `error` (a refused host key is
    `fatal`: it carries the key for the node page, and is never retried)."""

    answered: bool
    boot_id: str = ""
    error: str = ""
    fatal: TransportError | None = None


@dataclass
class Wait:
    """How a wait for the node ended: `ok`, or not with `message`; `fatal` a refused host key; `lines` its tries."""

    ok: bool
    message: str
    lines: list[str]
    fatal: TransportError | None = None
    canceled: bool = False


def reboot_requested(result: CommandResult) -> bool:
    """Whether `systemctl reboot` took: exit 0, or the connection closing under it (systemd may stop sshd before the
    command's exit status comes back), not a timeout, a cancel or a refusal (sudo asking for a password)."""
    return result.ok or (result.exit_code is None and not (result.timed_out or result.canceled or result.error))


class NodeWaits:
    """Waiting for a rebooting node over connections of their own (the job's died with the node), on the fan-out's
    event loop: until it stops answering, then until it answers again, each bounded and ended by a cancel."""

    def __init__(self, transport_name: str, parameters: dict):
        self.transport_name, self.parameters = transport_name, parameters

    async def until_down(self, target: NodeTarget, before: str) -> Wait:
        timeout, started, lines = self.parameters["down_timeout_seconds"], time.monotonic(), []
        while True:
            probe = await self.probe(target)
            waited = time.monotonic() - started
            if not probe.answered:
                return Wait(True, f"stopped answering after {waited:.1f} s: {probe.error}", lines)
            if probe.boot_id != before:
                return Wait(True, f"already back after {waited:.1f} s with boot id {probe.boot_id}", lines)
            lines.append(f"{waited:.1f} s: still answering with boot id {probe.boot_id}")
            if waited >= timeout:
                return Wait(False, f"still answering after {timeout} s: did it reboot?", lines)
            if await wait_unless_canceled(min(self.parameters["poll_seconds"], timeout - waited)):
                return Wait(False, "canceled", lines, canceled=True)

    async def until_up(self, target: NodeTarget) -> Wait:
        timeout, started, lines = self.parameters["up_timeout_seconds"], time.monotonic(), []
        delay = self.parameters["poll_seconds"]
        while True:
            probe = await self.probe(target)
            waited = time.monotonic() - started
            if probe.fatal is not None:
                return Wait(False, str(probe.fatal), lines, fatal=probe.fatal)
            if probe.answered:
                return Wait(True, f"answering over SSH after {waited:.1f} s, boot id {probe.boot_id}", lines)
            lines.append(f"{waited:.1f} s: not answering ({probe.error})")
            if waited >= timeout:
                return Wait(False, f"not answering after {timeout} s: {probe.error}", lines)
            if await wait_unless_canceled(min(delay, timeout - waited)):
                return Wait(False, "canceled", lines, canceled=True)
            delay = min(delay * 1.5, MAX_POLL_SECONDS)

    async def probe(self, target: NodeTarget) -> Probe:
        """A new connection to the node and its boot id: whether it answers, now."""
        try:
            (result,) = await self.run_apart(target, [build(BOOT_ID)])
        except TransportError as error:
            return Probe(False, error=str(error), fatal=error if error.fingerprint else None)
        if result.exit_code == UNREACHABLE_EXIT or result.exit_code is None:
            return Probe(False, error=_problem(result))
        return Probe(True, boot_id=_text(result).strip())

    async def run_apart(self, target: NodeTarget, commands: list[list[str]]) -> list[CommandResult]:
        """Run `commands` over a connection of their own; TransportError when none opens (the host key refused, the
        node unreachable)."""
        transport = get_transport(self.transport_name)
        try:
            session = await transport.open(target)
            try:
                results = []
                for argv in commands:
                    collector = OutputCollector(cap=1 << 16)
                    results.append(
                        await session.run(argv, timeout=30, collector=collector, cancel=cancel_event(), grace=1)
                    )
                return results
            finally:
                with contextlib.suppress(Exception):
                    await session.close()
        finally:
            with contextlib.suppress(Exception):
                await transport.aclose()


async def reboot_and_reconnect(target: NodeTarget, run, waits: NodeWaits, transcript: list[str]) -> str:
    """A deployment step's reboot between its fix and its verify, in the step's cell: the boot id, the reboot, the
    waits, then `run.reopen()` so the verify (and the node's later steps) run over a new connection. "" when the node
    is back as a new boot, else what went wrong (also in `transcript`)."""
    boot = await run(build(BOOT_ID), 30)
    transcript.append(f"$ {shell_join(build(BOOT_ID))}\n{_text(boot).rstrip()}")
    if not boot.ok:
        return f"could not read the boot id before the reboot: {_problem(boot)}"
    before = _text(boot).strip()
    result = await run(build(REBOOT), 60)
    transcript.append(f"$ {shell_join(build(REBOOT))}\n{_text(result).rstrip()}")
    if not reboot_requested(result):
        return f"reboot refused: {_problem(result)}"
    for label, wait in (("down", lambda: waits.until_down(target, before)), ("up", lambda: waits.until_up(target))):
        outcome = await wait()
        transcript.extend(f"# reboot, {label}: {line}" for line in [*outcome.lines, outcome.message])
        if not outcome.ok:
            return f"after the reboot, {label}: {outcome.message}"
    try:
        await run.reopen()
    except TransportError as error:
        return f"after the reboot: {error}"
    return ""


@register_kind
class RebootKind(JobKind):
    name = KIND
    label = "Reboot"
    description = (
        "Reboots each node (systemctl reboot), waits for it to go away and to answer over SSH again with a trusted "
        "host key, then checks that the boot id changed and the GPUs are all there. Nodes must be drained unless "
        "force is set."
    )
    parameters = RebootParameters
    transports = ("ssh", "sim")

    def __init__(self):
        self.waits: NodeWaits | None = None
        self.expected_gpus: dict[str, int] = {}
        self.boot_ids: dict[str, str] = {}  # hostname -> boot id before the reboot, filled by the `before` runner
        self.records: dict[tuple[str, str], CellRecord] = {}  # (hostname, step) -> what the runner found

    def steps(self, parameters: dict) -> list[StepSpec]:
        waits = parameters["down_timeout_seconds"] + parameters["up_timeout_seconds"]
        return [
            StepSpec(name="before", command="", label="Boot id and uptime", timeout=120),
            StepSpec(name="reboot", command="", label="Reboot", timeout=120),
            StepSpec(name="down", command="", label="Down", timeout=waits),
            StepSpec(name="up", command="", label="Up over SSH", timeout=waits),
            StepSpec(name="check", command="", label="Boot id and GPUs", timeout=180),
        ]

    def check_nodes(self, nodes: list, parameters: dict) -> None:
        in_service = sorted(node.hostname for node in nodes if not node.is_drained)
        if in_service and not parameters["force"]:
            raise serializers.ValidationError(
                {
                    "targets": [
                        f"Not drained: {', '.join(in_service)}. Drain them first (a reboot ends whatever runs on "
                        "them), or set force."
                    ]
                }
            )

    def prepare(self, job, shard) -> None:
        self.waits = NodeWaits(job.transport, job.parameters)
        self.expected_gpus = dict(shard.steps.values_list("node__hostname", "node__expected_gpu_count").distinct())

    def step_runner(self, step: StepSpec):
        return {
            "before": self._before,
            "reboot": self._reboot,
            "down": self._down,
            "up": self._up,
            "check": self._check,
        }[step.name]

    def cell_record(self, target: NodeTarget, step: StepSpec, result: CommandResult) -> CellRecord:
        record = self.records.get((target.hostname, step.name))
        if record is None or result.canceled:
            return CellRecord(default_status(result), default_summary(step, result))
        return record

    # --- the runners (the fan-out's event loop) -------------------------------------------------------------------

    async def _before(self, target: NodeTarget, run) -> CommandResult:
        result = await run(build(BOOT_ID), 30)
        if not result.ok:
            return result
        self.boot_ids[target.hostname] = _text(result).strip()
        uptime = await run(build("uptime"), 30)
        if uptime.ok:
            line = f"boot id {self.boot_ids[target.hostname]}; {_text(uptime).strip()}"
            self._note(target, "before", line, boot_id=self.boot_ids[target.hostname])
        return uptime

    async def _reboot(self, target: NodeTarget, run) -> CommandResult:
        result = await run(build(REBOOT), 60)
        if not reboot_requested(result):
            return result
        closed = "" if result.ok else " (the connection closed as the node went down)"
        self._note(target, "reboot", f"reboot requested{closed}")
        return _done([f"reboot requested{closed}"])

    async def _down(self, target: NodeTarget, run) -> CommandResult:
        return self._waited(target, "down", await self.waits.until_down(target, self.boot_ids.get(target.hostname, "")))

    async def _up(self, target: NodeTarget, run) -> CommandResult:
        return self._waited(target, "up", await self.waits.until_up(target))

    async def _check(self, target: NodeTarget, run) -> CommandResult:
        expected, before = self.expected_gpus.get(target.hostname, 0), self.boot_ids.get(target.hostname, "")
        commands = [build(BOOT_ID)] + ([build(GPU_LIST)] if expected else [])
        try:
            results = await self.waits.run_apart(target, commands)
        except TransportError as error:
            self.records[target.hostname, "check"] = CellRecord(default_status(_failed(error)), str(error))
            return _failed(error)
        transcript = [
            f"$ {shell_join(argv)}\n{_text(result)}".rstrip() for argv, result in zip(commands, results, strict=True)
        ]
        boot_id = _text(results[0]).strip() if results[0].ok else ""
        problems = []
        if not boot_id:
            problems.append(f"could not read the boot id: {_problem(results[0])}")
        elif boot_id == before:
            problems.append(f"boot id unchanged ({boot_id}): the node did not reboot")
        found = None
        if expected:
            gpus = results[1]
            found = sum(1 for line in _text(gpus).splitlines() if line.startswith("GPU ")) if gpus.ok else None
            if found is None:
                problems.append(f"nvidia-smi -L failed: {_problem(gpus)}")
            elif found < expected:
                problems.append(f"{found} of {expected} GPUs after the reboot")
        gpus_text = f", {found} of {expected} GPUs" if found is not None else ""
        summary = "; ".join(problems) or f"rebooted: boot id {before} → {boot_id}{gpus_text}"
        data = {"boot_id_before": before, "boot_id_after": boot_id, "gpus": found, "expected_gpus": expected}
        status = StepStatus.FAILED if problems else StepStatus.SUCCEEDED
        self.records[target.hostname, "check"] = CellRecord(status, summary, data)
        return _done(transcript + [summary], exit_code=1 if problems else 0)

    def _waited(self, target: NodeTarget, step: str, wait: Wait) -> CommandResult:
        if wait.canceled:
            return _done(wait.lines, canceled=True)
        if wait.fatal is not None:
            self.records[target.hostname, step] = CellRecord(default_status(_failed(wait.fatal)), wait.message)
            return _failed(wait.fatal, [*wait.lines, wait.message])
        status = StepStatus.SUCCEEDED if wait.ok else StepStatus.FAILED
        self.records[target.hostname, step] = CellRecord(status, wait.message)
        return _done([*wait.lines, wait.message], exit_code=0 if wait.ok else 1)

    def _note(self, target: NodeTarget, step: str, summary: str, **data) -> None:
        self.records[target.hostname, step] = CellRecord(StepStatus.SUCCEEDED, summary, data)


def _text(result: CommandResult) -> str:
    return (result.stdout or b"").decode("utf-8", errors="replace")


def _problem(result: CommandResult) -> str:
    text = (result.stderr or result.stdout or b"").decode("utf-8", errors="replace").strip()
    return result.error or (text.splitlines()[0] if text else f"exit {result.exit_code}")


def _done(lines: list[str], *, exit_code: int = 0, canceled: bool = False) -> CommandResult:
    stdout = "".join(f"{line}\n" for line in lines).encode()
    return CommandResult(
        exit_code=None if canceled else exit_code, stdout=stdout, stdout_size=len(stdout), canceled=canceled
    )


def _failed(error: TransportError, lines: list[str] = ()) -> CommandResult:
    stdout = "".join(f"{line}\n" for line in lines).encode()
    return CommandResult(
        error=str(error), host_key=error.host_key, fingerprint=error.fingerprint, stdout=stdout, stdout_size=len(stdout)
    )
