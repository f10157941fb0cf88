"""Jobs: a unit of work on a set of nodes, its node x step matrix, its gapless event log and its raw outputs."""

import zlib

from django.conf import settings
from django.db import models
from django.db.models import Q

from apps.core.models import PublicModel, TimestampedModel
from apps.jobs.choices import (
    JOB_ACTIVE,
    JOB_STATUS_COLOURS,
    JOB_TERMINAL,
    STEP_STATUS_COLOURS,
    ArtifactStream,
    EventLevel,
    JobStatus,
    ShardStatus,
    StepStatus,
)
from apps.jobs.kinds import KINDS, JobKind


class JobQuerySet(models.QuerySet):
    def active(self) -> "JobQuerySet":
        return self.filter(status__in=JOB_ACTIVE)

    def terminal(self) -> "JobQuerySet":
        return self.filter(status__in=JOB_TERMINAL)

    def visible_to(self, user) -> "JobQuerySet":
        # Every signed-in role may read every job: operators share the cluster and its history.
        if user is None or not user.is_authenticated:
            return self.none()
        return self

    def with_progress(self) -> "JobQuerySet":
        done = Q(steps__status__in=[s for s in StepStatus if s not in (StepStatus.PENDING, StepStatus.RUNNING)])
        return self.annotate(
            steps_total=models.Count("steps", distinct=True),
            steps_done=models.Count("steps", filter=done, distinct=True),
        )


class Job(PublicModel):
    """One run of a job kind over target nodes. Its task id is its public_id; shards share its nodes out."""

    kind = models.CharField(max_length=64, db_index=True)
    parameters = models.JSONField(default=dict, blank=True, help_text="Validated by the kind's parameter schema.")
    transport = models.CharField(max_length=16, help_text="How commands reach the nodes: ssh, local or sim.")
    target_spec = models.JSONField(default=dict, blank=True, help_text="The targets as requested (ids, filter).")
    nodes = models.ManyToManyField("inventory.Node", blank=True, related_name="jobs")
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED, db_index=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    heartbeat = models.DateTimeField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    node_count = models.PositiveIntegerField(default=0)
    shard_count = models.PositiveIntegerField(default=1)
    last_seq = models.PositiveBigIntegerField(default=0, help_text="Highest event seq allocated (events are gapless).")
    summary = models.CharField(max_length=300, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["status", "heartbeat"], name="job_status_heartbeat_idx")]

    def __str__(self) -> str:
        return f"{self.kind} {self.public_id}"

    @property
    def is_active(self) -> bool:
        return self.status in JOB_ACTIVE

    @property
    def is_terminal(self) -> bool:
        return self.status in JOB_TERMINAL

    @property
    def colour(self) -> str:
        return JOB_STATUS_COLOURS[JobStatus(self.status)]

    @property
    def task_id(self) -> str:
        return str(self.public_id)

    @property
    def devices(self) -> list[str]:
        """The names of its rows that are no inventory node (JobKind.devices: an NVLink switch tray's BMC)."""
        return list((self.target_spec or {}).get("devices", ()))

    @property
    def row_noun(self) -> str:
        """What a row of its matrix is: "node", its kind's device noun where it runs on devices only, else "target"."""
        if not self.devices:
            return "node"
        return KINDS.get(self.kind, JobKind).device_noun if not self.node_count else "target"

    @property
    def targets_text(self) -> str:
        """What it runs on, in words, as its kind counts them: "32 nodes", "9 switch trays"."""
        return KINDS.get(self.kind, JobKind).counted_targets(self.node_count, len(self.devices))


class JobShard(TimestampedModel):
    """A slice of a job's nodes run by one Celery task, so that several workers share a large job."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="shards")
    index = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=ShardStatus.choices, default=ShardStatus.QUEUED)
    worker = models.CharField(max_length=200, blank=True, help_text="Celery worker host name running the shard.")
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    heartbeat = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(
        default=0, help_text="How many times a worker claimed the shard (more than one: re-queued after a lost worker)."
    )

    class Meta:
        ordering = ["job", "index"]
        constraints = [models.UniqueConstraint(fields=["job", "index"], name="jobshard_unique_index")]
        indexes = [models.Index(fields=["status", "heartbeat"], name="jobshard_status_heartbeat_idx")]

    def __str__(self) -> str:
        return f"{self.job_id}/{self.index}"

    @property
    def task_id(self) -> str:
        # The first shard's task id is the job's public id; others add their index (a re-run adds `-rerun<n>`).
        return str(self.job.public_id) if self.index == 0 else f"{self.job.public_id}-{self.index}"


class JobStep(TimestampedModel):
    """One cell of the node x step matrix: a step of the job on one node."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="steps")
    shard = models.ForeignKey(JobShard, on_delete=models.CASCADE, related_name="steps")
    node = models.ForeignKey(
        "inventory.Node", null=True, blank=True, on_delete=models.SET_NULL, related_name="job_steps"
    )
    hostname = models.CharField(max_length=253, help_text="Kept when the node is deleted.")
    step = models.CharField(max_length=64)
    position = models.PositiveSmallIntegerField(default=0, help_text="Order of the step within the job.")
    label = models.CharField(max_length=120, blank=True)
    status = models.CharField(max_length=16, choices=StepStatus.choices, default=StepStatus.PENDING)
    exit_code = models.IntegerField(null=True, blank=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    summary = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["job", "hostname", "position"]
        constraints = [models.UniqueConstraint(fields=["job", "hostname", "step"], name="jobstep_unique_cell")]
        indexes = [models.Index(fields=["job", "status"], name="jobstep_job_status_idx")]

    def __str__(self) -> str:
        return f"{self.hostname} {self.step} {self.status}"

    @property
    def colour(self) -> str:
        return STEP_STATUS_COLOURS[StepStatus(self.status)]


class JobEvent(TimestampedModel):
    """One line of a job's log. (job, seq) is unique and gapless: the database is the truth, live pushes a copy."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveBigIntegerField()
    level = models.CharField(max_length=8, choices=EventLevel.choices, default=EventLevel.INFO)
    hostname = models.CharField(max_length=253, blank=True)
    step = models.CharField(max_length=64, blank=True)
    message = models.TextField(blank=True)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["job", "seq"]
        constraints = [models.UniqueConstraint(fields=["job", "seq"], name="jobevent_unique_seq")]
        indexes = [models.Index(fields=["created"], name="jobevent_created_idx")]

    def __str__(self) -> str:
        return f"{self.job_id}#{self.seq} {self.message[:60]}"


class Artifact(PublicModel):
    """The raw stdout or stderr of a step's command, zlib-compressed, cut at cap_bytes (the cut is recorded)."""

    step = models.ForeignKey(JobStep, on_delete=models.CASCADE, related_name="artifacts")
    stream = models.CharField(max_length=8, choices=ArtifactStream.choices)
    content = models.BinaryField(help_text="zlib-compressed bytes as the command wrote them, up to cap_bytes.")
    size_bytes = models.PositiveBigIntegerField(default=0, help_text="How many bytes the command wrote.")
    stored_bytes = models.PositiveBigIntegerField(default=0, help_text="How many of them are kept.")
    cap_bytes = models.PositiveBigIntegerField(help_text="The cap in force when the artifact was written.")

    class Meta:
        ordering = ["step", "stream"]
        constraints = [models.UniqueConstraint(fields=["step", "stream"], name="artifact_unique_stream")]
        indexes = [models.Index(fields=["created"], name="artifact_created_idx")]

    def __str__(self) -> str:
        return f"{self.step} {self.stream}"

    @property
    def truncated(self) -> bool:
        return self.stored_bytes < self.size_bytes

    def text(self) -> str:
        return zlib.decompress(bytes(self.content)).decode("utf-8", errors="replace")

    @property
    def filename(self) -> str:
        return f"{self.step.hostname}-{self.step.step}.{self.stream}.txt"


def compress(data: bytes) -> bytes:
    return zlib.compress(data, 6)


__all__ = ["Artifact", "EventLevel", "Job", "JobEvent", "JobShard", "JobStep", "compress"]
