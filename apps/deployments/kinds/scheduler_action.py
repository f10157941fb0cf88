"""The `scheduler-action` job kind: tell the cluster's scheduler that a node is drained, back in service, or to be
rebooted once its jobs end, on the scheduler's controller (the commands, the controller and starting the job:
apps/deployments/node_operations.py).

In Slurm every action is checked: the node is read back after it (`scontrol show node -o NODE`), the read decides
whether the cell succeeds (drained with the reason asked; not drained after a resume), and what was read is stored
as the scheduler's view of the node (apps/schedulers/services.py)."""

from django.conf import settings
from django.utils import timezone
from rest_framework import serializers

from apps.deployments.node_operations import ACTIONS, KIND, SCHEDULERS, SLURM_REASON, VERIFY, scheduler_steps
from apps.jobs.choices import StepStatus
from apps.jobs.kinds import CellRecord, JobKind, StepSpec, default_status, default_summary, register_kind
from apps.nodeexec.catalogue import PLACEHOLDERS
from apps.parsers.errors import ParseError
from apps.parsers.slurm import parse_show_nodes
from apps.schedulers.services import record_slurm_nodes

NOT_DRAINED = "Invalid node state specified"  # Slurm's answer to a resume of a node that is not drained


class SchedulerActionParameters(serializers.Serializer):
    scheduler = serializers.ChoiceField(choices=SCHEDULERS, required=False)
    action = serializers.ChoiceField(choices=ACTIONS)
    node = serializers.RegexField(rf"^(?:{PLACEHOLDERS['scheduler_node'].pattern})\Z", max_length=253)
    reason = serializers.RegexField(rf"^(?:{SLURM_REASON})\Z", required=False, allow_blank=True)

    def validate(self, attrs):
        attrs.setdefault("scheduler", settings.RACKPILOT_SCHEDULER_KIND)
        if attrs["scheduler"] not in SCHEDULERS:
            raise serializers.ValidationError({"scheduler": f"RACKPILOT_SCHEDULER_KIND is not one of {SCHEDULERS}."})
        if attrs["action"] == "reboot" and attrs["scheduler"] != "slurm":
            raise serializers.ValidationError({"action": "A reboot through the scheduler is Slurm's (reboot ASAP)."})
        if attrs["action"] in {"drain", "reboot"} and attrs["scheduler"] == "slurm" and not attrs.get("reason"):
            raise serializers.ValidationError({"reason": f"Slurm needs a reason to {attrs['action']} a node."})
        return attrs


@register_kind
class SchedulerAction(JobKind):
    name = KIND
    label = "Scheduler drain/undrain/reboot"
    description = (
        "Cordons and drains (or uncordons) a node in Kubernetes, or drains, resumes or reboots (ASAP, then resume) "
        "it in Slurm and reads it back."
    )
    parameters = SchedulerActionParameters
    transports = ("ssh", "local", "sim")

    def __init__(self):
        self.action, self.node, self.reason = "", "", ""
        self.read: dict[str, str] = {}  # controller -> `scontrol show node -o NODE`, filled by cell_record

    def steps(self, parameters: dict) -> list[StepSpec]:
        return scheduler_steps(
            scheduler=parameters["scheduler"],
            action=parameters["action"],
            node=parameters["node"],
            reason=parameters.get("reason", ""),
        )

    def prepare(self, job, shard):
        self.action, self.node = job.parameters["action"], job.parameters["node"]
        self.reason = job.parameters.get("reason", "")

    def cell_record(self, target, step, result):
        if step.name == "scontrol-resume" and result.exit_code == 1 and NOT_DRAINED in result.stderr.decode():
            return CellRecord(StepStatus.SUCCEEDED, f"Slurm: {NOT_DRAINED} (the read back says whether it is drained)")
        if step.name != VERIFY or not result.ok:
            return CellRecord(default_status(result), default_summary(step, result))
        text = result.stdout.decode("utf-8", errors="replace")
        try:
            (node,) = parse_show_nodes(text).nodes
        except (ParseError, ValueError):
            return CellRecord(StepStatus.FAILED, "not scontrol's record of one node")
        self.read[target.hostname] = text
        shown = "+".join([node.state, *node.flags]) + (f", reason {node.reason!r}" if node.reason else "")
        if self.action == "undrain":
            done = not node.drained
        elif self.action == "reboot":
            done = bool({"REBOOT_REQUESTED", "REBOOT_ISSUED"} & set(node.flags)) and node.reason == self.reason
        else:
            done = node.drained and node.reason == self.reason
        return CellRecord(StepStatus.SUCCEEDED if done else StepStatus.FAILED, f"Slurm: {shown}", {"slurm": shown})

    def shard_finished(self, job, shard):
        for text in self.read.values():
            record_slurm_nodes(
                listing=parse_show_nodes(text), read_at=timezone.now(), job_id=job.public_id, only=[self.node]
            )
