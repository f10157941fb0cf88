"""Deployments: a plan for bringing a set of nodes to production, its runs, verdicts, suggestions and approvals."""

from django.conf import settings
from django.db import models

from apps.core.audit import AuditedModel
from apps.core.models import PublicModel, TimestampedModel
from apps.deployments.choices import (
    DEPLOYMENT_STATE_COLOURS,
    OUTCOME_COLOURS,
    SUGGESTION_STATE_COLOURS,
    ApprovalScope,
    ClusterCheck,
    ClusterCheckStatus,
    Comparator,
    DeploymentState,
    Outcome,
    SuggestionState,
    WizardStage,
)


class AcceptanceCriterion(AuditedModel, TimestampedModel):
    """A threshold an acceptance check is judged by, per GPU SKU (no SKU: the default for every SKU).

    With a reference, `threshold` and `warn_threshold` are percentages of it (HBM copy bandwidth against the SKU's
    measured reference); without one they are absolute values in `unit`. A check retries `retries` times, waiting
    `cooldown_seconds` between tries, before it fails: bandwidth tests are noisy right after a burn-in.
    """

    sku = models.ForeignKey(
        "inventory.GpuSku", null=True, blank=True, on_delete=models.CASCADE, related_name="acceptance_criteria"
    )
    check_name = models.CharField(max_length=40)
    comparator = models.CharField(max_length=2, choices=Comparator.choices, default=Comparator.AT_LEAST)
    threshold = models.FloatField()
    warn_threshold = models.FloatField(null=True, blank=True, help_text="Between this and the threshold: warn.")
    reference = models.CharField(
        max_length=40, blank=True, help_text="What the thresholds are a percentage of (empty: absolute values)."
    )
    unit = models.CharField(max_length=16, blank=True)
    retries = models.PositiveSmallIntegerField(default=0)
    cooldown_seconds = models.FloatField(default=0)
    description = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["check_name", "sku__name"]
        verbose_name_plural = "acceptance criteria"
        constraints = [
            models.UniqueConstraint(fields=["sku", "check_name"], name="criterion_unique_per_sku"),
            models.UniqueConstraint(
                fields=["check_name"], condition=models.Q(sku__isnull=True), name="criterion_unique_default"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.check_name} ({self.sku.name if self.sku_id else 'default'})"


class DeploymentQuerySet(models.QuerySet):
    def visible_to(self, user) -> "DeploymentQuerySet":
        # Every signed-in role reads deployments; writes are checked by role.
        if user is None or not user.is_authenticated:
            return self.none()
        return self


class Deployment(AuditedModel, PublicModel):
    """A plan for a set of nodes: options (versions, baselines, network, NCCL ...), criteria, and its runs."""

    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    target_spec = models.JSONField(default=dict, blank=True, help_text="The nodes as picked (names, racks, tags).")
    nodes = models.ManyToManyField("inventory.Node", related_name="deployments")
    options = models.JSONField(default=dict, blank=True, help_text="Versions, baselines and settings of the plan.")
    criteria = models.JSONField(default=dict, blank=True, help_text="Acceptance criteria by check, editable.")
    stage = models.CharField(max_length=16, choices=WizardStage.choices, default=WizardStage.NODES)
    state = models.CharField(max_length=16, choices=DeploymentState.choices, default=DeploymentState.DRAFT)
    transport = models.CharField(max_length=16, blank=True, help_text="Empty: the installation's default.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="deployments"
    )
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    approved_at = models.DateTimeField(null=True, blank=True)

    objects = DeploymentQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return self.name

    @property
    def colour(self) -> str:
        return DEPLOYMENT_STATE_COLOURS[DeploymentState(self.state)]

    @property
    def is_draft(self) -> bool:
        return self.state == DeploymentState.DRAFT

    @property
    def latest_run(self) -> "DeploymentRun | None":
        return self.runs.select_related("job").order_by("-number").first()


class DeploymentRun(TimestampedModel):
    """One run of the plan (the first, or a resume): a `deploy` job over the nodes that still had work."""

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="runs")
    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="deployment_run")
    number = models.PositiveIntegerField()
    resume = models.BooleanField(default=False)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["deployment", "number"]
        constraints = [models.UniqueConstraint(fields=["deployment", "number"], name="deploymentrun_unique_number")]

    def __str__(self) -> str:
        return f"{self.deployment.name} run {self.number}"


class Verdict(TimestampedModel):
    """What one acceptance check found on one node (and one GPU/NIC when it is about one), with its evidence."""

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="verdicts")
    run = models.ForeignKey(DeploymentRun, on_delete=models.CASCADE, related_name="verdicts")
    node = models.ForeignKey("inventory.Node", null=True, on_delete=models.SET_NULL, related_name="+")
    hostname = models.CharField(max_length=253)
    step = models.CharField(max_length=40)
    check_name = models.CharField(max_length=40)
    subject = models.CharField(max_length=64, blank=True, help_text='What it is about: "GPU3", "ens1np0", "".')
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    value = models.CharField(max_length=120, blank=True)
    criterion = models.CharField(max_length=300, help_text="The rule it was judged by, in words.")
    threshold = models.FloatField(null=True, blank=True)
    reference = models.FloatField(null=True, blank=True)
    reference_label = models.CharField(max_length=80, blank=True)
    unit = models.CharField(max_length=16, blank=True)
    attempts = models.PositiveSmallIntegerField(default=1)
    evidence = models.TextField(blank=True, help_text="The lines of output the verdict rests on.")

    class Meta:
        ordering = ["hostname", "step", "check_name", "subject", "id"]
        indexes = [models.Index(fields=["deployment", "hostname", "step"], name="verdict_cell_idx")]

    def __str__(self) -> str:
        return f"{self.hostname} {self.check_name} {self.subject} {self.outcome}"

    @property
    def colour(self) -> str:
        return OUTCOME_COLOURS[Outcome(self.outcome)]


class Suggestion(PublicModel):
    """A troubleshooting suggestion for a failed check: what is wrong where, the likely cause, what to check next,
    and the fix (commands, or a remediation step the operator approves)."""

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="suggestions")
    run = models.ForeignKey(DeploymentRun, on_delete=models.CASCADE, related_name="suggestions")
    node = models.ForeignKey("inventory.Node", null=True, on_delete=models.SET_NULL, related_name="+")
    hostname = models.CharField(max_length=253)
    step = models.CharField(max_length=40)
    problem = models.CharField(max_length=40, help_text="Which known problem: mtu, pfc, xid79, firmware ...")
    subject = models.CharField(max_length=64, blank=True)
    title = models.CharField(max_length=200)
    cause = models.TextField()
    next_check = models.TextField(blank=True)
    fix = models.TextField(blank=True, help_text="What fixes it, in words.")
    fix_commands = models.JSONField(default=list, blank=True, help_text="Commands the fix runs on the node.")
    remediation_step = models.CharField(
        max_length=40, blank=True, help_text="The plan step whose apply is the fix (approving it lets resume run it)."
    )
    evidence = models.TextField(blank=True)
    state = models.CharField(max_length=16, choices=SuggestionState.choices, default=SuggestionState.OPEN)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "hostname", "step", "id"]

    def __str__(self) -> str:
        return f"{self.hostname}: {self.title}"

    @property
    def colour(self) -> str:
        return SUGGESTION_STATE_COLOURS[SuggestionState(self.state)]

    @property
    def can_approve(self) -> bool:
        return self.state == SuggestionState.OPEN and bool(self.remediation_step)


class Approval(TimestampedModel):
    """An operator's sign-off: of the plan, of a disruptive step on named nodes, or of a suggested fix. It keeps
    exactly which nodes and commands were shown when it was given."""

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="approvals")
    scope = models.CharField(max_length=8, choices=ApprovalScope.choices)
    step = models.CharField(max_length=40, blank=True)
    hostnames = models.JSONField(default=list, blank=True)
    commands = models.JSONField(default=dict, blank=True, help_text="hostname: [command lines] as shown.")
    suggestion = models.ForeignKey(Suggestion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    approved_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    approved_by_name = models.CharField(max_length=150, blank=True, help_text="Kept when the user is deleted.")

    class Meta:
        ordering = ["deployment", "created", "id"]

    def __str__(self) -> str:
        return f"{self.deployment.name}: {self.scope} {self.step} by {self.approved_by_name}"


class ClusterAcceptanceCheck(TimestampedModel):
    """One check of phase 5, cluster acceptance, over the deployment's nodes together: multi-node NCCL, the sweep
    for the slow node or link, or HPL-MxP. Each is a benchmark run started through apps.benchmarks' services; this
    row keeps its verdict, the figure it rests on and what the run named (suspects with NIC, cable, switch port)."""

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="cluster_checks")
    run = models.ForeignKey(DeploymentRun, on_delete=models.CASCADE, related_name="cluster_checks")
    attempt = models.PositiveIntegerField(default=1, help_text="1, then one more each time it is run again.")
    check_name = models.CharField(max_length=16, choices=ClusterCheck.choices)
    status = models.CharField(max_length=8, choices=ClusterCheckStatus.choices, default=ClusterCheckStatus.QUEUED)
    outcome = models.CharField(max_length=16, choices=Outcome.choices, blank=True)
    value = models.CharField(max_length=120, blank=True)
    criterion = models.CharField(max_length=300, blank=True)
    summary = models.CharField(max_length=300, blank=True)
    benchmark_run = models.ForeignKey(
        "benchmarks.BenchmarkRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    details = models.JSONField(default=dict, blank=True, help_text="Figures, suspects and series for the report.")
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["deployment", "run", "attempt", "id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "attempt", "check_name"], name="clustercheck_unique_per_attempt")
        ]

    def __str__(self) -> str:
        return f"{self.deployment.name} {self.check_name} (attempt {self.attempt}): {self.outcome or self.status}"

    @property
    def colour(self) -> str:
        if not self.outcome:
            return "blue" if self.status == ClusterCheckStatus.RUNNING else "grey"
        return OUTCOME_COLOURS[Outcome(self.outcome)]
