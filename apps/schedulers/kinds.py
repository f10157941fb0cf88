"""The `scheduler-readback` job kind: ask the scheduler's controller for every node's state and reason, in Slurm
(`scontrol show node -o`) or Kubernetes (`kubectl get nodes -o json`: cordon, taints, conditions), and store the
scheduler's view on the inventory's nodes (services.record_slurm_nodes / record_kubernetes_nodes)."""

from django.conf import settings
from django.utils import timezone
from rest_framework import serializers

from apps.core.text import counted
from apps.jobs.choices import EventLevel, StepStatus
from apps.jobs.events import emit
from apps.jobs.kinds import CellRecord, JobKind, StepSpec, default_status, default_summary, register_kind
from apps.parsers.errors import ParseError
from apps.parsers.kubernetes import parse_get_nodes
from apps.parsers.slurm import parse_show_nodes
from apps.schedulers import commands, services
from apps.schedulers.choices import Scheduler

KIND = "scheduler-readback"


class ReadbackParameters(serializers.Serializer):
    scheduler = serializers.ChoiceField(choices=Scheduler.choices, required=False)

    def validate(self, attrs):
        attrs.setdefault("scheduler", settings.RACKPILOT_SCHEDULER_KIND)
        if attrs["scheduler"] not in Scheduler.values:
            raise serializers.ValidationError({"scheduler": "RACKPILOT_SCHEDULER_KIND is not slurm or kubernetes."})
        return attrs


# What each scheduler's listing is read with, and how it is stored.
READERS = {
    Scheduler.SLURM: (commands.SHOW_NODES, "Slurm nodes", parse_show_nodes, services.record_slurm_nodes),
    Scheduler.KUBERNETES: (
        commands.KUBE_NODES,
        "Kubernetes nodes",
        parse_get_nodes,
        services.record_kubernetes_nodes,
    ),
}


@register_kind
class SchedulerReadback(JobKind):
    name = KIND
    label = "Scheduler readback"
    description = (
        "Reads every node's state and reason on the scheduler's controller (Slurm: scontrol show node -o; "
        "Kubernetes: kubectl get nodes -o json, its cordon, taints and conditions) and stores the scheduler's view "
        "on the inventory's nodes."
    )
    parameters = ReadbackParameters
    transports = ("ssh", "local", "sim")
    rerun_on_worker_loss = True  # a read: running it twice stores the same view

    def __init__(self):
        self.listings: dict[str, str] = {}  # controller host name -> the listing, filled by cell_record
        self.scheduler = Scheduler.SLURM

    def steps(self, parameters: dict) -> list[StepSpec]:
        command, label, _, _ = READERS[parameters.get("scheduler", Scheduler.SLURM)]
        return [StepSpec(name="nodes", command=command, label=label)]

    def prepare(self, job, shard):
        self.scheduler = job.parameters.get("scheduler", Scheduler.SLURM)

    def cell_record(self, target, step, result):
        if not result.ok:
            return CellRecord(default_status(result), default_summary(step, result))
        _, label, parse, _ = READERS[self.scheduler]
        text = result.stdout.decode("utf-8", errors="replace")
        try:
            listing = parse(text)
        except ParseError as error:
            return CellRecord(StepStatus.FAILED, f"not the controller's node listing: {error}")
        self.listings[target.hostname] = text
        drained = sum(bool(services.is_drained(node)) for node in listing.nodes)
        return CellRecord(StepStatus.SUCCEEDED, f"{counted(len(listing.nodes), 'node')}, {drained} drained or cordoned")

    def shard_finished(self, job, shard):
        _, _, parse, record = READERS[self.scheduler]
        for hostname, text in self.listings.items():
            recorded = record(listing=parse(text), read_at=timezone.now(), job_id=job.public_id)
            level = EventLevel.WARNING if recorded.absent else EventLevel.INFO
            emit(
                job,
                f"{counted(len(recorded.changed), 'node')} changed in the scheduler, {recorded.unchanged} unchanged"
                + (f"; not in the scheduler: {', '.join(recorded.absent[:20])}" if recorded.absent else ""),
                level=level,
                hostname=hostname,
                data={"changed": recorded.changed, "absent": recorded.absent},
            )
