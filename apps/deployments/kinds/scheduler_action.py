"""The `scheduler-action` job kind: tell the cluster's scheduler that a node is drained or back in service, on the
scheduler's controller (the commands, the controller and starting the job: apps/deployments/node_operations.py)."""

from django.conf import settings
from rest_framework import serializers

from apps.deployments.node_operations import KIND, SCHEDULERS, SLURM_REASON, scheduler_steps
from apps.jobs.kinds import JobKind, StepSpec, register_kind
from apps.nodeexec.catalogue import PLACEHOLDERS


class SchedulerActionParameters(serializers.Serializer):
    scheduler = serializers.ChoiceField(choices=SCHEDULERS, required=False)
    action = serializers.ChoiceField(choices=["drain", "undrain"])
    node = serializers.RegexField(rf"^(?:{PLACEHOLDERS['scheduler_node'].pattern})\Z", max_length=253)
    reason = serializers.RegexField(rf"^(?:{SLURM_REASON})\Z", required=False, allow_blank=True)

    def validate(self, attrs):
        attrs.setdefault("scheduler", settings.RACKPILOT_SCHEDULER_KIND)
        if attrs["scheduler"] not in SCHEDULERS:
            raise serializers.ValidationError({"scheduler": f"RACKPILOT_SCHEDULER_KIND is not one of {SCHEDULERS}."})
        if attrs["action"] == "drain" and attrs["scheduler"] == "slurm" and not attrs.get("reason"):
            raise serializers.ValidationError({"reason": "Slurm needs a reason to drain a node."})
        return attrs


@register_kind
class SchedulerAction(JobKind):
    name = KIND
    label = "Scheduler drain/undrain"
    description = "Cordons and drains (or uncordons) a node in Kubernetes, or drains (or resumes) it in Slurm."
    parameters = SchedulerActionParameters
    transports = ("ssh", "sim")

    def steps(self, parameters: dict) -> list[StepSpec]:
        return scheduler_steps(
            scheduler=parameters["scheduler"],
            action=parameters["action"],
            node=parameters["node"],
            reason=parameters.get("reason", ""),
        )
