"""What runs on the cluster: training jobs and inference services, the things faults hurt and SLOs measure.

Shared by diagnosis (incidents belong to a workload) and monitoring (SLOs per service or job). This app only records;
the simulator runs simulated workloads from these rows and real ones run wherever their launcher put them.
"""

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from apps.core.audit import AuditedModel
from apps.core.models import PublicModel
from apps.core.validators import name_validator
from apps.inventory.models import Node, StorageTier
from apps.nodeexec.catalogue import CommandError, confine
from apps.workloads.choices import (
    SERVICE_ACTIVE,
    SERVICE_STATE_COLOURS,
    TRAINING_ACTIVE,
    TRAINING_STATE_COLOURS,
    Framework,
    Launcher,
    RecoveryPolicy,
    ServiceState,
    TrainingState,
    WorkloadClass,
)

path_validator = RegexValidator(r"^/[A-Za-z0-9._/-]*\Z", "Enter an absolute path such as /data/hot/ckpt/llama.")


class Workload(AuditedModel, PublicModel):
    """What training jobs and inference services have in common."""

    name = models.CharField(max_length=100, unique=True, validators=[name_validator])
    workload_class = models.CharField(max_length=16, choices=WorkloadClass.choices, default=WorkloadClass.STANDARD)
    comments = models.TextField(blank=True)

    class Meta:
        abstract = True
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class TrainingJobQuerySet(models.QuerySet):
    def active(self) -> "TrainingJobQuerySet":
        return self.filter(state__in=TRAINING_ACTIVE)

    def on(self, node: Node) -> "TrainingJobQuerySet":
        return self.filter(members__node=node)


class TrainingJob(Workload):
    """A distributed training run: which nodes hold which ranks, where it checkpoints, where its log is."""

    framework = models.CharField(max_length=16, choices=Framework.choices, default=Framework.PYTORCH)
    launcher = models.CharField(max_length=16, choices=Launcher.choices, default=Launcher.TORCHRUN)
    nodes = models.ManyToManyField(Node, through="TrainingJobNode", related_name="training_jobs")
    ranks_per_node = models.PositiveSmallIntegerField(
        default=8, validators=[MinValueValidator(1), MaxValueValidator(16)], help_text="One rank per GPU, usually."
    )
    checkpoint_dir = models.CharField(max_length=255, blank=True, validators=[path_validator])
    checkpoint_tier = models.ForeignKey(
        StorageTier, null=True, blank=True, on_delete=models.SET_NULL, related_name="training_jobs"
    )
    checkpoint_interval_steps = models.PositiveIntegerField(
        default=1000, validators=[MinValueValidator(1), MaxValueValidator(10_000_000)]
    )
    log_path = models.CharField(
        max_length=255, blank=True, validators=[path_validator], help_text="Where the launcher's log is read from."
    )
    state = models.CharField(max_length=16, choices=TrainingState.choices, default=TrainingState.PENDING)
    started_at = models.DateTimeField(null=True, blank=True)
    entrypoint = models.CharField(
        max_length=255,
        default="/workspace/pretrain_gpt.py",
        validators=[path_validator],
        help_text="The training script the launcher runs (a resume relaunches it with --load and --ckpt-step).",
    )
    recovery_policy = models.CharField(max_length=16, choices=RecoveryPolicy.choices, default=RecoveryPolicy.MANUAL)
    recovery_max_retries = models.PositiveSmallIntegerField(
        default=3,
        validators=[MaxValueValidator(10)],
        help_text="Automatic policy: recoveries run without approval in a row (since the last verified one).",
    )
    checkpoint_keep = models.PositiveSmallIntegerField(
        default=3,
        validators=[MinValueValidator(1), MaxValueValidator(1000)],
        help_text="Valid checkpoints a recovery keeps when it must free space (older ones may be removed).",
    )
    placements = models.JSONField(
        default=list,
        blank=True,
        help_text='Earlier node lists, oldest first: [{"hosts": [...], "until": ISO time, "reason": ...}].',
    )
    progress_error = models.CharField(
        max_length=300,
        blank=True,
        editable=False,
        help_text="Why the last read of its log failed (blank: it did not); written by the progress reads.",
    )
    progress_error_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The newest checkpoint its log says was saved (Megatron's "successfully saved checkpoint from iteration N"),
    # written by the progress reads: what a checkpoint-aware quarantine waits for (docs/health.md).
    last_checkpoint_step = models.PositiveBigIntegerField(null=True, blank=True, editable=False)
    last_checkpoint_path = models.CharField(max_length=255, blank=True, editable=False)

    objects = TrainingJobQuerySet.as_manager()

    class Meta(Workload.Meta):
        pass

    @property
    def state_colour(self) -> str:
        return TRAINING_STATE_COLOURS[self.state]

    def clean(self) -> None:
        """The log and the checkpoint directory are read on the job's nodes (training progress, the runbooks,
        recovery): each must lie under the directories its setting allows, in normal form (no `..`)."""
        super().clean()
        errors = {}
        for name, setting in (
            ("log_path", "RACKPILOT_TRAINING_LOG_DIRS"),
            ("checkpoint_dir", "RACKPILOT_CHECKPOINT_DIRS"),
        ):
            value = getattr(self, name)
            if value:
                try:
                    confine(value, setting=setting, name=name)
                except CommandError as error:
                    errors[name] = str(error).removeprefix(f"{name}: ")
        if errors:
            raise ValidationError(errors)

    @property
    def world_size(self) -> int:
        return self.members.count() * self.ranks_per_node

    def rank_map(self) -> list[tuple[int, Node, int]]:
        """(global rank, node, local GPU index) for every rank: torchrun's order, node rank by node rank."""
        return [
            (member.node_rank * self.ranks_per_node + local, member.node, local)
            for member in self.members.select_related("node").order_by("node_rank")
            for local in range(self.ranks_per_node)
        ]


class TrainingJobNode(models.Model):
    """A node's place in a training job: its node rank decides which global ranks it holds."""

    job = models.ForeignKey(TrainingJob, on_delete=models.CASCADE, related_name="members")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="training_memberships")
    node_rank = models.PositiveSmallIntegerField()

    class Meta:
        ordering = ["job", "node_rank"]
        constraints = [
            models.UniqueConstraint(fields=["job", "node"], name="trainingjobnode_unique_node"),
            models.UniqueConstraint(fields=["job", "node_rank"], name="trainingjobnode_unique_rank"),
        ]

    def __str__(self) -> str:
        return f"{self.job} node rank {self.node_rank}: {self.node}"


class InferenceServiceQuerySet(models.QuerySet):
    def active(self) -> "InferenceServiceQuerySet":
        return self.filter(state__in=SERVICE_ACTIVE)


class InferenceService(Workload):
    """A model served on some nodes behind an OpenAI-compatible endpoint, sized for a throughput and a p99."""

    endpoint = models.URLField(
        max_length=255, blank=True, help_text="OpenAI-compatible base URL, e.g. http://llama.svc:8000/v1."
    )
    model = models.CharField(max_length=200, validators=[name_validator], help_text="e.g. meta-llama/Llama-3.1-70B.")
    nodes = models.ManyToManyField(Node, related_name="inference_services")
    design_tokens_per_second = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(100_000_000)],
        help_text="Generated tokens per second the service was sized for.",
    )
    latency_target_ms = models.PositiveIntegerField(
        default=100, validators=[MinValueValidator(1), MaxValueValidator(600_000)], help_text="p99 end-to-end latency."
    )
    state = models.CharField(max_length=16, choices=ServiceState.choices, default=ServiceState.SERVING)
    replicas = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(1000)],
        help_text="How many of its nodes serve now (one replica per node, by host name); blank: all of them. "
        "The elastic-scaling policy sets it.",
    )

    objects = InferenceServiceQuerySet.as_manager()

    class Meta(Workload.Meta):
        pass

    @property
    def state_colour(self) -> str:
        return SERVICE_STATE_COLOURS[self.state]

    def serving_hostnames(self) -> list[str]:
        """The host names of the nodes that serve now: the first `replicas` of its nodes by host name."""
        hostnames = sorted(node.hostname for node in self.nodes.all())
        return hostnames if self.replicas is None else hostnames[: self.replicas]


class TrainingProgress(models.Model):
    """One step line of a training job's log: a point of its step / loss series, as the job's launcher wrote it.

    Compact on purpose (a series point, like a BMC reading): written by the `training-progress` job kind that reads
    the log, never by a page. A step run again after a restart replaces the point of its first run."""

    job = models.ForeignKey(TrainingJob, on_delete=models.CASCADE, related_name="progress")
    step = models.PositiveBigIntegerField()
    time = models.DateTimeField(help_text="When the log says the step ended (UTC).")
    loss = models.FloatField(null=True, blank=True)
    samples_per_second = models.FloatField(null=True, blank=True)
    seconds_per_step = models.FloatField(null=True, blank=True)
    learning_rate = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["job", "step"]
        constraints = [models.UniqueConstraint(fields=["job", "step"], name="trainingprogress_unique_step")]
        indexes = [models.Index(fields=["job", "time"], name="trainingprogress_time_idx")]

    def __str__(self) -> str:
        return f"{self.job} step {self.step}"
