"""The `gpu-reset` job kind: reset one GPU of a drained node (`nvidia-smi -r -i N`, root), then check the driver lists
it again (`nvidia-smi -L`). A node operation, as `reboot` is: remediation starts it for a GPU fault whose node it has
drained (docs/health.md, "Remediation"); an operator may start it too. A node that is not drained is refused when the
job is created: a reset kills whatever runs on that GPU."""

from rest_framework import serializers

from apps.jobs.choices import StepStatus
from apps.jobs.kinds import CellRecord, JobKind, StepSpec, default_status, default_summary, register_kind
from apps.nodeexec.base import CommandResult, NodeTarget
from apps.nodeexec.catalogue import CATALOGUE, Command, register_command

KIND = "gpu-reset"
RESET = "nvidia-smi-reset"
GPU_LIST = "nvidia-smi-list"

if RESET not in CATALOGUE:
    register_command(
        Command(
            RESET,
            ("nvidia-smi", "-r", "-i", "{gpu_index}"),
            "Reset one GPU (no process may be using it; pending row remaps are applied).",
            root=True,
            placeholders=("gpu_index",),
        )
    )


class GpuResetParameters(serializers.Serializer):
    gpu_index = serializers.IntegerField(min_value=0, max_value=99, help_text="The GPU's index on the node.")
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=300)


@register_kind
class GpuReset(JobKind):
    name = KIND
    label = "GPU reset"
    description = "Resets one GPU of a drained node (nvidia-smi -r -i N), then checks the driver lists it again."
    parameters = GpuResetParameters

    def __init__(self):
        self.gpu_index = 0

    def prepare(self, job, shard) -> None:
        self.gpu_index = job.parameters["gpu_index"]

    def steps(self, parameters: dict) -> list[StepSpec]:
        index = parameters["gpu_index"]
        return [
            StepSpec("reset", RESET, f"Reset GPU {index}", values={"gpu_index": str(index)}),
            StepSpec("check", GPU_LIST, f"GPU {index} listed"),
        ]

    def check_nodes(self, nodes: list, parameters: dict) -> None:
        busy = sorted(node.hostname for node in nodes if not node.is_drained)
        if busy:
            raise serializers.ValidationError(
                {"targets": [f"{', '.join(busy)} is not drained: drain it first (a GPU reset kills what runs on it)."]}
            )

    def cell_record(self, target: NodeTarget, step: StepSpec, result: CommandResult) -> CellRecord:
        if step.name != "check" or default_status(result) != StepStatus.SUCCEEDED:
            return super().cell_record(target, step, result)
        index = self.gpu_index
        listed = f"GPU {index}:" in result.stdout.decode(errors="replace")
        if not listed:
            return CellRecord(StepStatus.FAILED, f"GPU {index} is not listed after its reset")
        return CellRecord(StepStatus.SUCCEEDED, default_summary(step, result))
