"""The `scheduler-action` job kind: tell the cluster's scheduler that a node is drained, back in service, or to be
rebooted once its jobs end, on the scheduler's controller (the commands, the controller and starting the job:
apps/deployments/node_operations.py).

Every action is checked: the node is read back after it (`scontrol show node -o NODE`, `kubectl get node NODE -o
json`), the read decides whether the cell succeeds (Slurm: drained with the reason asked, not drained after a resume;
Kubernetes: cordoned with the quarantine taint the reason asked, neither after an undrain), and what was read is
stored as the scheduler's view of the node (apps/schedulers/services.py)."""

from django.conf import settings
from django.utils import timezone
from rest_framework import serializers

from apps.deployments.node_operations import ACTIONS, KIND, SCHEDULERS, SLURM_REASON, VERIFY, scheduler_steps
from apps.deployments.signals import scheduler_action_finished
from apps.jobs.choices import StepStatus
from apps.jobs.kinds import CellRecord, JobKind, StepSpec, default_status, default_summary, register_kind
from apps.nodeexec.catalogue import PLACEHOLDERS
from apps.parsers.errors import ParseError
from apps.parsers.kubernetes import parse_get_nodes
from apps.parsers.slurm import parse_show_nodes
from apps.schedulers.commands import KUBE_UNTAINT, QUARANTINE_KEY, quarantine_value
from apps.schedulers.services import record_kubernetes_nodes, record_slurm_nodes

NOT_DRAINED = "Invalid node state specified"  # Slurm's answer to a resume of a node that is not drained
NO_TAINT = "not found"  # kubectl's answer to removing a taint the node does not carry


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
        "Cordons, taints and drains (or untaints and uncordons) a node in Kubernetes, or drains, resumes or reboots "
        "(ASAP, then resume) it in Slurm, and reads it back."
    )
    parameters = SchedulerActionParameters
    transports = ("ssh", "local", "sim")

    def __init__(self):
        self.action, self.node, self.reason, self.scheduler = "", "", "", "slurm"
        self.read: dict[str, str] = {}  # controller -> the node read back, filled by cell_record

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
        self.scheduler = job.parameters.get("scheduler", "slurm")

    def cell_record(self, target, step, result):
        if step.name == "scontrol-resume" and result.exit_code == 1 and NOT_DRAINED in result.stderr.decode():
            return CellRecord(StepStatus.SUCCEEDED, f"Slurm: {NOT_DRAINED} (the read back says whether it is drained)")
        if step.name == KUBE_UNTAINT and result.exit_code == 1 and NO_TAINT in result.stderr.decode():
            return CellRecord(StepStatus.SUCCEEDED, "Kubernetes: no quarantine taint to remove")
        if step.name != VERIFY or not result.ok:
            return CellRecord(default_status(result), default_summary(step, result))
        text = result.stdout.decode("utf-8", errors="replace")
        if self.scheduler == "kubernetes":
            return self._kubernetes_verify(target, text)
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

    def _kubernetes_verify(self, target, text: str) -> CellRecord:
        try:
            (node,) = parse_get_nodes(text).nodes
        except (ParseError, ValueError):
            return CellRecord(StepStatus.FAILED, "not kubectl's record of one node")
        self.read[target.hostname] = text
        quarantine = [taint.value for taint in node.taints if taint.key == QUARANTINE_KEY]
        shown = ("cordoned" if node.unschedulable else "schedulable") + (
            f", taint {QUARANTINE_KEY}={quarantine[0]}" if quarantine else ", no quarantine taint"
        )
        if self.action == "undrain":
            done = not node.unschedulable and not quarantine
        else:
            done = node.unschedulable and quarantine == [quarantine_value(self.reason)]
        return CellRecord(
            StepStatus.SUCCEEDED if done else StepStatus.FAILED, f"Kubernetes: {shown}", {"kubernetes": shown}
        )

    def shard_finished(self, job, shard):
        parse, record = (
            (parse_get_nodes, record_kubernetes_nodes)
            if self.scheduler == "kubernetes"
            else (parse_show_nodes, record_slurm_nodes)
        )
        for text in self.read.values():
            record(listing=parse(text), read_at=timezone.now(), job_id=job.public_id, only=[self.node])

    def job_finished(self, job) -> None:
        scheduler_action_finished.send(sender=type(self), job=job)
