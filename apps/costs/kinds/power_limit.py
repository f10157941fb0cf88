"""The `power-limit` job kind: put a policy action's GPU power limits on its nodes (apply, or enforce after a node
forgot them at a reboot), or put the defaults back (revert). Each node's row is check → set → verify: read the limits
in force (nvidia-smi --query-gpu), set only the GPUs that differ (nvidia-smi -i N -pl W, root), read them again."""

from django.db import transaction
from django.utils import timezone
from rest_framework import serializers

from apps.core import audit
from apps.core.choices import AuditAction
from apps.costs.commands import LIMIT_FIELDS, READ_LIMITS, set_limit_argv
from apps.costs.kinds.actions import end_action, joined_results
from apps.costs.models import PolicyAction
from apps.costs.policies.energy import JOB_KIND
from apps.jobs.choices import EventLevel, StepStatus
from apps.jobs.events import emit
from apps.jobs.kinds import CellRecord, JobKind, StepSpec, register_kind
from apps.nodeexec.base import CommandResult, NodeTarget
from apps.nodeexec.catalogue import build
from apps.parsers.errors import ParseError
from apps.parsers.nvidia_smi import parse_query_gpu

MODES = ("apply", "revert", "enforce")
CHECK, SET, VERIFY = "check", "set", "verify"


class PowerLimitParameters(serializers.Serializer):
    action = serializers.UUIDField(help_text="The policy action whose limits to put on (or take off) its nodes.")
    mode = serializers.ChoiceField(
        choices=MODES, help_text="apply: its limits; revert: the defaults; enforce: its limits where a node lost them."
    )

    def validate_action(self, value):
        if not PolicyAction.objects.filter(public_id=value).exists():
            raise serializers.ValidationError("No such policy action.")
        return value


def _limits(text: str) -> dict[int, float]:
    report = parse_query_gpu(text, LIMIT_FIELDS)
    return {gpu.index: gpu.power_limit_w for gpu in report.gpus if gpu.index is not None}


@register_kind
class PowerLimit(JobKind):
    name = JOB_KIND
    label = "GPU power limits"
    started_through = "its cost policy (POST /api/cost-policies/{id}/dry-run/, then apply/ once approved)"
    description = (
        "Sets the GPU power limits a cost policy's action names (nvidia-smi -i N -pl W), or the defaults back, "
        "on each of its nodes: check, set what differs, verify."
    )
    parameters = PowerLimitParameters
    transports = ("ssh", "local", "sim")
    rerun_on_worker_loss = True  # check, set what differs, verify: running it again does no harm

    def __init__(self):
        self.wanted: dict[str, dict[int, int]] = {}
        self.found: dict[tuple[str, str], dict[int, float]] = {}
        self.changed: dict[str, list[int]] = {}
        self.problems: dict[tuple[str, str], str] = {}
        self.mode = "apply"

    def steps(self, parameters: dict) -> list[StepSpec]:
        return [
            StepSpec(CHECK, "", "Read the limits", timeout=90),
            StepSpec(SET, "", "Set what differs", timeout=600),
            StepSpec(VERIFY, "", "Verify", timeout=90),
        ]

    def prepare(self, job, shard) -> None:
        action = PolicyAction.objects.get(public_id=job.parameters["action"])
        self.mode = job.parameters["mode"]
        key = "default_w" if self.mode == "revert" else "to_w"
        for row in action.plan:
            self.wanted.setdefault(row["hostname"], {})[int(row["gpu"])] = int(row[key])

    def step_runner(self, step: StepSpec):
        async def read(target: NodeTarget, run) -> CommandResult:
            result = await run(build(READ_LIMITS), 60.0)
            if not result.ok:
                return result
            try:
                limits = _limits(result.stdout.decode("utf-8", errors="replace"))
            except ParseError as error:
                self.problems[target.hostname, step.name] = f"could not read the limits: {error}"
                return CommandResult(exit_code=1, stdout=result.stdout, stderr=f"{error}\n".encode())
            self.found[target.hostname, step.name] = limits
            wanted = self.wanted.get(target.hostname, {})
            if step.name == VERIFY:
                wrong = [
                    f"GPU {gpu} at {limits.get(gpu, 0):g} W, not {watts} W"
                    for gpu, watts in wanted.items()
                    if limits.get(gpu) is None or abs(limits[gpu] - watts) > 0.5
                ]
                if wrong:
                    self.problems[target.hostname, step.name] = "; ".join(wrong)
                    return CommandResult(exit_code=1, stdout=result.stdout, stderr=("; ".join(wrong) + "\n").encode())
            return result

        async def set_limits(target: NodeTarget, run) -> CommandResult:
            limits = self.found.get((target.hostname, CHECK), {})
            wanted = self.wanted.get(target.hostname, {})
            todo = [(gpu, watts) for gpu, watts in sorted(wanted.items()) if abs(limits.get(gpu, -1) - watts) > 0.5]
            results = []
            for gpu, watts in todo:
                result = await run(set_limit_argv(gpu, watts), 60.0)
                results.append(result)
                if not result.ok:
                    break
            self.changed[target.hostname] = [gpu for (gpu, _), result in zip(todo, results, strict=False) if result.ok]
            return joined_results(results) if results else CommandResult(exit_code=0, stdout=b"nothing to change\n")

        return set_limits if step.name == SET else read

    def cell_record(self, target: NodeTarget, step: StepSpec, result: CommandResult) -> CellRecord:
        problem = self.problems.get((target.hostname, step.name))
        if problem and not result.error:
            return CellRecord(StepStatus.FAILED, problem[:300])
        if not result.ok:
            return super().cell_record(target, step, result)
        wanted = self.wanted.get(target.hostname, {})
        if step.name == SET:
            changed = self.changed.get(target.hostname, [])
            if not changed:
                return CellRecord(StepStatus.SUCCEEDED, "every GPU already at its limit", {"changed": []})
            watts = sorted({wanted[gpu] for gpu in changed})
            summary = f"GPU {', '.join(map(str, changed))} set to {', '.join(map(str, watts))} W"
            return CellRecord(StepStatus.SUCCEEDED, summary, {"changed": changed})
        limits = self.found.get((target.hostname, step.name), {})
        shown = sorted({f"{value:g} W" for value in limits.values()})
        return CellRecord(StepStatus.SUCCEEDED, f"{len(limits)} GPUs at {', '.join(shown)}", {})

    def shard_finished(self, job, shard) -> None:
        if self.mode != "enforce":
            return
        reset = {host: gpus for host, gpus in self.changed.items() if gpus}
        if not reset:
            return
        with transaction.atomic():
            action = PolicyAction.objects.select_for_update().get(public_id=job.parameters["action"])
            action.reapplied_count += 1
            action.reapplied_at = timezone.now()
            action.message = "re-applied on " + ", ".join(sorted(reset)) + " (the limit was gone: a reboot)"
            action.save()
            audit.record(
                AuditAction.START,
                obj=action,
                object_repr=f"re-applied power limits of {action.policy.name} on {', '.join(sorted(reset))}"[:200],
                changes={"gpus": [None, {host: gpus for host, gpus in sorted(reset.items())}]},
                job=job,
            )
        for host, gpus in sorted(reset.items()):
            emit(
                job,
                f"{host}: GPU {', '.join(map(str, gpus))} had lost the limit (rebooted?): set again",
                level=EventLevel.WARNING,
                hostname=host,
                step=SET,
            )

    def job_finished(self, job) -> None:
        if job.parameters["mode"] != "enforce":
            end_action(job, applied="applied on every node", reverted="defaults back on every node")
