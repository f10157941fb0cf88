"""apps/monitoring/kinds/training_progress.py: `training-progress` reads the end of a training job's log on its node
rank 0 and stores its step lines (step, loss, throughput, learning rate) as the job's progress series
(docs/monitoring.md, "Training progress"). Beat starts one per active training job every
RACKPILOT_TRAINING_PROGRESS_SECONDS (apps/monitoring/progress.py); the job page's chart, /metrics and Grafana read
what it stored."""

from django.utils import timezone
from rest_framework import serializers

from apps.core.text import counted
from apps.diagnosis import commands  # noqa: F401  (registers tail-log)
from apps.jobs.choices import EventLevel
from apps.jobs.events import emit
from apps.jobs.kinds import CellRecord, JobKind, StepSpec, default_status, default_summary, register_kind
from apps.monitoring.progress import KIND
from apps.nodeexec.base import CommandResult, NodeTarget
from apps.nodeexec.catalogue import CommandError, confine
from apps.parsers.training_log import parse_checkpoint_saves, parse_progress
from apps.workloads import services as workloads
from apps.workloads.models import TrainingJob, TrainingJobNode

STEP = "log"
LOG_LINES = 2000  # of the log's end: 20,000 steps of Megatron's every-10-steps lines, more than one read misses


class TrainingProgressParameters(serializers.Serializer):
    training_job = serializers.UUIDField(help_text="The training job whose log is read (its public id).")

    def validate_training_job(self, value):
        job = TrainingJob.objects.filter(public_id=value).first()
        if job is None:
            raise serializers.ValidationError("No training job has this id.")
        if not job.log_path:
            raise serializers.ValidationError("This training job has no log path to read.")
        try:  # a path stored before it was confined is refused here, not read
            confine(job.log_path, setting="RACKPILOT_TRAINING_LOG_DIRS", name="log_path")
        except CommandError as error:
            raise serializers.ValidationError(str(error)) from None
        return str(value)

    def validate(self, attrs):
        job = TrainingJob.objects.get(public_id=attrs["training_job"])
        # kept with the job, so its page shows which file was read and the job list names the training job
        return {**attrs, "log_path": job.log_path, "training_job_name": job.name}


@register_kind
class TrainingProgressRead(JobKind):
    name = KIND
    label = "Training progress"
    description = (
        "Reads the end of a training job's log on its node rank 0 (tail) and stores its step lines: step, loss, "
        "throughput and learning rate, as Megatron-LM, DeepSpeed and detectron2 print them."
    )
    parameters = TrainingProgressParameters
    rerun_on_worker_loss = True  # a read; the points are upserted by step
    # The log is a file named on the training job: read on its node (never the worker's own host), kept for
    # operators; every role reads the progress parsed from it.
    transports = ("ssh", "sim")
    private_output = True

    def __init__(self):
        self.logs: dict[tuple[str, str], str] = {}  # (hostname, step name) -> the log's end, filled by cell_record
        self.errors: dict[str, str] = {}  # hostname -> why its read failed

    def steps(self, parameters: dict) -> list[StepSpec]:
        values = {"number": LOG_LINES, "log_file": parameters["log_path"]}
        return [StepSpec(STEP, "tail-log", "Training log", values=values)]

    def check_nodes(self, nodes: list, parameters: dict) -> None:
        """Only node rank 0 holds the step lines (torchrun's rank 0 prints them)."""
        first = (
            TrainingJobNode.objects.filter(job__public_id=parameters["training_job"], node_rank=0)
            .select_related("node")
            .first()
        )
        if first is None:
            raise serializers.ValidationError({"targets": ["The training job has no nodes: there is no log to read."]})
        if [node.pk for node in nodes] != [first.node_id]:
            raise serializers.ValidationError(
                {"targets": [f"Read the log on the job's node rank 0, {first.node.hostname}, and only there."]}
            )

    def cell_record(self, target: NodeTarget, step: StepSpec, result: CommandResult) -> CellRecord:
        if not result.ok:
            summary = default_summary(step, result)
            stderr = (result.stderr or b"").decode("utf-8", "replace").strip()
            self.errors[target.hostname] = f"{target.hostname}: {stderr or summary}"
            return CellRecord(default_status(result), summary)
        text = result.stdout.decode("utf-8", "replace")
        self.logs[(target.hostname, step.name)] = text
        points = parse_progress(text)
        newest = f", newest step {points[-1].step}" if points else ""
        return CellRecord(default_status(result), f"{counted(len(points), 'step line')}{newest}")

    def shard_finished(self, job, shard) -> None:
        training_job = TrainingJob.objects.filter(public_id=job.parameters["training_job"]).first()
        if training_job is None:
            emit(job, "The training job was deleted before its progress was stored.", level=EventLevel.WARNING)
            return
        # The training job's page says why reads fail (once, while they do), and the schedule reads it less often.
        workloads.note_progress_read(job=training_job, error="; ".join(self.errors.values()))
        now = timezone.now()
        for (hostname, _), text in self.logs.items():
            written = workloads.record_progress(job=training_job, points=parse_progress(text, now=now))
            workloads.note_checkpoints(job=training_job, saves=parse_checkpoint_saves(text))
            emit(
                job, f"{counted(written, 'progress point')} of {training_job.name} stored", hostname=hostname, step=STEP
            )
