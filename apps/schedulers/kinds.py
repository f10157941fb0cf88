"""The `scheduler-readback` job kind: ask the scheduler's controller for every node's state and reason (`scontrol
show node -o`) and store the scheduler's view on the inventory's nodes (services.record_slurm_nodes)."""

from django.utils import timezone
from rest_framework import serializers

from apps.jobs.choices import EventLevel, StepStatus
from apps.jobs.events import emit
from apps.jobs.kinds import CellRecord, JobKind, StepSpec, default_status, default_summary, register_kind
from apps.parsers.errors import ParseError
from apps.parsers.slurm import parse_show_nodes
from apps.schedulers import commands, services

KIND = "scheduler-readback"


class ReadbackParameters(serializers.Serializer):
    pass


@register_kind
class SchedulerReadback(JobKind):
    name = KIND
    label = "Scheduler readback"
    description = (
        "Reads every node's Slurm state and reason on the scheduler's controller (scontrol show node -o) and stores "
        "the scheduler's view on the inventory's nodes."
    )
    parameters = ReadbackParameters
    transports = ("ssh", "local", "sim")
    rerun_on_worker_loss = True  # a read: running it twice stores the same view

    def __init__(self):
        self.listings: dict[str, str] = {}  # controller host name -> scontrol's output, filled by cell_record

    def steps(self, parameters: dict) -> list[StepSpec]:
        return [StepSpec(name="nodes", command=commands.SHOW_NODES, label="Slurm nodes")]

    def cell_record(self, target, step, result):
        if not result.ok:
            return CellRecord(default_status(result), default_summary(step, result))
        text = result.stdout.decode("utf-8", errors="replace")
        try:
            listing = parse_show_nodes(text)
        except ParseError as error:
            return CellRecord(StepStatus.FAILED, f"not scontrol's node listing: {error}")
        self.listings[target.hostname] = text
        drained = sum(node.drained for node in listing.nodes)
        return CellRecord(StepStatus.SUCCEEDED, f"{len(listing.nodes)} node(s), {drained} drained")

    def shard_finished(self, job, shard):
        for hostname, text in self.listings.items():
            recorded = services.record_slurm_nodes(
                listing=parse_show_nodes(text), read_at=timezone.now(), job_id=job.public_id
            )
            level = EventLevel.WARNING if recorded.absent else EventLevel.INFO
            emit(
                job,
                f"{len(recorded.changed)} node(s) changed in the scheduler, {recorded.unchanged} unchanged"
                + (f"; not in Slurm: {', '.join(recorded.absent[:20])}" if recorded.absent else ""),
                level=level,
                hostname=hostname,
                data={"changed": recorded.changed, "absent": recorded.absent},
            )
