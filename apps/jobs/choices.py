from django.db import models


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELED = "canceled", "Canceled"
    ERROR = "error", "Error"


JOB_ACTIVE = frozenset({JobStatus.QUEUED, JobStatus.RUNNING})
JOB_TERMINAL = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELED, JobStatus.ERROR})
JOB_STATUS_COLOURS = {
    JobStatus.QUEUED: "grey",
    JobStatus.RUNNING: "blue",
    JobStatus.SUCCEEDED: "green",
    JobStatus.FAILED: "red",
    JobStatus.CANCELED: "orange",
    JobStatus.ERROR: "purple",
}


class ShardStatus(models.TextChoices):
    """A slice of a job's nodes run by one Celery task; the job ends when all its shards have."""

    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    CANCELED = "canceled", "Canceled"
    ERROR = "error", "Error"


SHARD_ACTIVE = frozenset({ShardStatus.QUEUED, ShardStatus.RUNNING})
SHARD_TERMINAL = frozenset({ShardStatus.DONE, ShardStatus.CANCELED, ShardStatus.ERROR})


class StepStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    SKIPPED = "skipped", "Skipped"
    CANCELED = "canceled", "Canceled"
    ERROR = "error", "Error"


STEP_ACTIVE = frozenset({StepStatus.PENDING, StepStatus.RUNNING})
STEP_TERMINAL = frozenset(
    {StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.SKIPPED, StepStatus.CANCELED, StepStatus.ERROR}
)
FAILED_STEPS = (StepStatus.FAILED, StepStatus.ERROR)  # a node with one of these "has a failure"
STEP_STATUS_COLOURS = {
    StepStatus.PENDING: "grey",
    StepStatus.RUNNING: "blue",
    StepStatus.SUCCEEDED: "green",
    StepStatus.FAILED: "red",
    StepStatus.SKIPPED: "grey",
    StepStatus.CANCELED: "orange",
    StepStatus.ERROR: "purple",
}


class EventLevel(models.TextChoices):
    DEBUG = "debug", "Debug"
    INFO = "info", "Info"
    OUTPUT = "output", "Output"
    WARNING = "warning", "Warning"
    ERROR = "error", "Error"


class ArtifactStream(models.TextChoices):
    STDOUT = "stdout", "Standard output"
    STDERR = "stderr", "Standard error"
