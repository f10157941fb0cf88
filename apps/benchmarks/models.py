"""Benchmark records: references (expected values as data), runs, their rounds and tests with every row of the
series, the suspects a sweep named, and accepted baselines."""

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from apps.benchmarks.choices import (
    REGRESSION_PCT,
    RUN_STATUS_COLOURS,
    VERDICT_COLOURS,
    Collective,
    Purpose,
    RunStatus,
    Scope,
    Suite,
    TimelineOrigin,
    Verdict,
    judge_against,
)
from apps.core.models import PublicModel
from apps.jobs.services import describe_targets


class ReferenceQuerySet(models.QuerySet):
    def for_sku(self, sku_name: str) -> "ReferenceQuerySet":
        return self.filter(sku_name=sku_name)


class Reference(PublicModel):
    """The expected bus bandwidth (GB/s) of a collective on a GPU SKU and fabric, in three tiers: `expected` (what a
    healthy system reaches), `warn_gb_per_s` (below: warn) and `fail_gb_per_s` (below: fail). Judged at sizes from
    `min_size_bytes`. Shipped rows say where their figure comes from (`source`); operators edit them."""

    # By name, as the SKU catalogue names it: references are data that outlive an inventory emptied and re-imported.
    sku_name = models.CharField(max_length=64, help_text='A GPU SKU of the catalogue, e.g. "H200 SXM".')
    fabric = models.CharField(
        max_length=32, help_text='"nvlink" inside a node; across nodes the data NICs, e.g. "roce-8x400g".'
    )
    scope = models.CharField(max_length=8, choices=Scope.choices)
    collective = models.CharField(max_length=16, choices=Collective.choices, default=Collective.ALL_REDUCE)
    min_size_bytes = models.BigIntegerField(default=2**30, help_text="Sizes from which the figure applies.")
    expected_gb_per_s = models.FloatField()
    warn_gb_per_s = models.FloatField()
    fail_gb_per_s = models.FloatField()
    source = models.TextField(blank=True)

    objects = ReferenceQuerySet.as_manager()

    class Meta:
        ordering = ["sku_name", "scope", "fabric", "collective"]
        constraints = [
            models.UniqueConstraint(
                fields=["sku_name", "fabric", "scope", "collective"], name="benchmark_reference_unique_per_sku_fabric"
            ),
            models.CheckConstraint(
                condition=Q(fail_gb_per_s__lte=F("warn_gb_per_s"))
                & Q(warn_gb_per_s__lte=F("expected_gb_per_s"))
                & Q(fail_gb_per_s__gte=0),
                name="benchmark_reference_tiers_ordered",
                violation_error_message="Tiers must satisfy 0 ≤ fail ≤ warn ≤ expected.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.sku_name} {self.fabric} {self.collective}: {self.expected_gb_per_s:g} GB/s"

    def judge(self, value: float | None) -> str:
        return judge_against(value, warn_below=self.warn_gb_per_s, fail_below=self.fail_gb_per_s)


class BenchmarkRunQuerySet(models.QuerySet):
    def recent(self) -> "BenchmarkRunQuerySet":
        return self.order_by("-created", "-id")

    def visible_to(self, user) -> "BenchmarkRunQuerySet":
        if user is None or not user.is_authenticated:
            return self.none()
        return self


def baseline_change(pct: float | None) -> str:
    if pct is None:
        return ""
    if abs(pct) < 0.05:
        return "as the baseline"
    return f"{pct:+.1f} %".replace("-", "\u2212")


class BenchmarkRun(PublicModel):
    """One benchmark asked for: a suite over a set of nodes. Its tests run as jobs of the `nccl-tests` kind, one job
    per round (a plain run has one round; a sweep several)."""

    suite = models.CharField(max_length=16, choices=Suite.choices)
    collective = models.CharField(max_length=16, choices=Collective.choices, default=Collective.ALL_REDUCE)
    parameters = models.JSONField(default=dict, blank=True)
    transport = models.CharField(max_length=8)
    target_spec = models.JSONField(default=dict, blank=True)
    nodes = models.ManyToManyField("inventory.Node", related_name="benchmark_runs")
    sku_name = models.CharField(max_length=64, blank=True, help_text="The GPU SKU of every node of the set.")
    fabric = models.CharField(max_length=32, blank=True)
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED)
    summary = models.CharField(max_length=300, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="benchmark_runs"
    )
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    round_count = models.PositiveIntegerField(default=0)
    test_count = models.PositiveIntegerField(default=0)
    round_bound = models.PositiveIntegerField(default=0, help_text="2⌈log₂N⌉+1 for a sweep of N nodes.")
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="accepted_benchmark_runs",
    )
    accepted_at = models.DateTimeField(null=True, blank=True)
    # Set by services.cancel_run; the run's executor starts no further round once it is.
    cancel_requested = models.BooleanField(default=False)
    canceled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="canceled_benchmark_runs",
    )

    objects = BenchmarkRunQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(suite__in=Suite.values), name="benchmark_run_suite_known"),
            models.CheckConstraint(condition=Q(status__in=RunStatus.values), name="benchmark_run_status_known"),
        ]

    def __str__(self) -> str:
        return f"{self.suite} {self.collective} on {self.target_spec or 'nodes'} ({self.status})"

    @property
    def colour(self) -> str:
        return RUN_STATUS_COLOURS[self.status]

    @property
    def target_text(self) -> str:
        """The nodes asked for, in words (the stored spec is a dict)."""
        return describe_targets(self.target_spec) or "nodes"

    @property
    def rounds_run(self) -> int:
        """The rounds run so far: the executor's count, else the rounds recorded (a run stored before it counted)."""
        return self.round_count or self.rounds.count()


class Round(PublicModel):
    """One round of a run: the tests in it ran at the same time on disjoint nodes, as one job."""

    run = models.ForeignKey(BenchmarkRun, on_delete=models.CASCADE, related_name="rounds")
    index = models.PositiveIntegerField()
    job = models.OneToOneField(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="benchmark_round"
    )
    cooldown_seconds = models.FloatField(default=0)
    link_errors = models.JSONField(
        default=list, blank=True, help_text="NICs whose CRC/symbol error counters grew over the round (ethtool -S)."
    )

    class Meta:
        ordering = ["run", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="benchmark_round_unique_index")]

    def __str__(self) -> str:
        return f"round {self.index + 1} of {self.run_id}"


class BenchmarkTest(PublicModel):
    """One test: nccl-tests on one node or across `hosts` (launched from `launcher`), every row of its table in
    `series`, the figure judged (the out-of-place busbw at the largest size), and its verdict with evidence."""

    run = models.ForeignKey(BenchmarkRun, null=True, blank=True, on_delete=models.CASCADE, related_name="tests")
    round = models.ForeignKey(Round, null=True, blank=True, on_delete=models.CASCADE, related_name="tests")
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="benchmark_tests")
    launcher = models.CharField(max_length=253)
    hosts = models.JSONField(default=list, help_text="Host names in the test, launcher first.")
    hosts_key = models.CharField(max_length=2000, help_text="Sorted host names joined by commas: the baseline scope.")
    purpose = models.CharField(max_length=16, choices=Purpose.choices, default=Purpose.RUN)
    subject = models.CharField(max_length=253, blank=True, help_text="The node under test against a partner.")
    partner = models.CharField(max_length=253, blank=True)
    collective = models.CharField(max_length=16, choices=Collective.choices)
    size_bytes = models.BigIntegerField(null=True, blank=True)
    busbw_gb_per_s = models.FloatField(null=True, blank=True)
    avg_busbw_gb_per_s = models.FloatField(null=True, blank=True)
    series = models.JSONField(default=list, blank=True, help_text="Every row: size, count, time, algbw, busbw.")
    rails = models.JSONField(default=dict, blank=True, help_text="RDMA device: busbw over that rail alone.")
    nic_findings = models.JSONField(default=list, blank=True)
    reference = models.ForeignKey(Reference, null=True, blank=True, on_delete=models.SET_NULL, related_name="tests")
    expected_gb_per_s = models.FloatField(null=True, blank=True)
    warn_gb_per_s = models.FloatField(null=True, blank=True)
    fail_gb_per_s = models.FloatField(null=True, blank=True)
    baseline = models.ForeignKey(
        "benchmarks.Baseline", null=True, blank=True, on_delete=models.SET_NULL, related_name="compared_tests"
    )
    baseline_gb_per_s = models.FloatField(null=True, blank=True)
    z_score = models.FloatField(null=True, blank=True)
    verdict = models.CharField(max_length=16, choices=Verdict.choices, default=Verdict.COULD_NOT_RUN)
    evidence = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["run", "round__index", "launcher", "id"]
        constraints = [
            models.UniqueConstraint(fields=["job", "launcher"], name="benchmark_test_unique_per_job_launcher"),
            models.CheckConstraint(condition=Q(verdict__in=Verdict.values), name="benchmark_test_verdict_known"),
        ]

    def __str__(self) -> str:
        return f"{'+'.join(self.hosts)} {self.collective}: {self.busbw_gb_per_s} GB/s ({self.verdict})"

    @property
    def colour(self) -> str:
        return VERDICT_COLOURS[self.verdict]

    @property
    def pct_expected(self) -> float | None:
        if self.busbw_gb_per_s is None or not self.expected_gb_per_s:
            return None
        return round(100 * self.busbw_gb_per_s / self.expected_gb_per_s, 1)

    @property
    def pct_baseline(self) -> float | None:
        """(value − baseline) / baseline in %: negative is slower than the accepted baseline."""
        if self.busbw_gb_per_s is None or not self.baseline_gb_per_s:
            return None
        return round(100 * (self.busbw_gb_per_s - self.baseline_gb_per_s) / self.baseline_gb_per_s, 1)

    @property
    def baseline_change(self) -> str:
        """The change against the accepted baseline in words: "+2.1 %", "−3.4 %", "as the baseline" ("0.0 %" under a
        "% baseline" heading read as nothing of it)."""
        return baseline_change(self.pct_baseline)

    @property
    def regressed(self) -> bool:
        pct = self.pct_baseline
        return pct is not None and pct < -REGRESSION_PCT


class Suspect(PublicModel):
    """A node a sweep called bad after its re-test, named down to the NIC, its cable and the switch port."""

    run = models.ForeignKey(BenchmarkRun, on_delete=models.CASCADE, related_name="suspects")
    node = models.ForeignKey("inventory.Node", on_delete=models.CASCADE, related_name="benchmark_suspicions")
    nic = models.CharField(max_length=15, blank=True)
    cable = models.CharField(max_length=64, blank=True, help_text="The cable's label, or its public id.")
    switch = models.CharField(max_length=64, blank=True)
    switch_port = models.CharField(max_length=32, blank=True)
    cause = models.CharField(max_length=300, blank=True)
    busbw_gb_per_s = models.FloatField(null=True, blank=True)
    expected_gb_per_s = models.FloatField(null=True, blank=True)
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    evidence = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["run", "node__hostname"]
        constraints = [models.UniqueConstraint(fields=["run", "node"], name="benchmark_suspect_unique_per_run")]

    def __str__(self) -> str:
        return f"{self.node.hostname} {self.nic} ({self.switch} {self.switch_port})"


class Baseline(PublicModel):
    """The accepted figure for a scope (collective over a set of hosts): later tests of that scope show their change
    against it."""

    collective = models.CharField(max_length=16, choices=Collective.choices)
    hosts_key = models.CharField(max_length=2000)
    test = models.ForeignKey(BenchmarkTest, on_delete=models.CASCADE, related_name="baselines")
    busbw_gb_per_s = models.FloatField()
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="benchmark_baselines"
    )

    class Meta:
        ordering = ["collective", "hosts_key"]
        constraints = [
            models.UniqueConstraint(fields=["collective", "hosts_key"], name="benchmark_baseline_unique_per_scope")
        ]

    def __str__(self) -> str:
        return f"{self.collective} {self.hosts_key}: {self.busbw_gb_per_s:g} GB/s"


# --- the per-node suites: HPL-MxP, nvbandwidth, burn-in ---------------------------------------------------------


class MeasurementReference(PublicModel):
    """The expected value of one figure a per-node suite measures on a GPU SKU (e.g. HPL-MxP's LU GFLOPS per GPU, an
    nvbandwidth test case's GB/s, the SM clock a burn-in sustains), in three tiers where higher is better. Shipped
    rows say where their figure comes from (`source`); operators edit them."""

    sku_name = models.CharField(max_length=64, help_text='A GPU SKU of the catalogue, e.g. "H200 SXM".')
    suite = models.CharField(max_length=16, choices=Suite.choices)
    case = models.CharField(max_length=64, help_text="The figure: an nvbandwidth test case, lu_gflops_per_gpu, ...")
    unit = models.CharField(max_length=16)
    expected = models.FloatField()
    warn_below = models.FloatField()
    fail_below = models.FloatField()
    source = models.TextField(blank=True)

    class Meta:
        ordering = ["sku_name", "suite", "case"]
        constraints = [
            models.UniqueConstraint(fields=["sku_name", "suite", "case"], name="measurement_reference_unique_case"),
            models.CheckConstraint(
                condition=Q(fail_below__lte=F("warn_below")) & Q(warn_below__lte=F("expected")) & Q(fail_below__gte=0),
                name="measurement_reference_tiers_ordered",
                violation_error_message="Tiers must satisfy 0 ≤ fail ≤ warn ≤ expected.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.sku_name} {self.suite} {self.case}: {self.expected:g} {self.unit}"

    def judge(self, value: float | None) -> str:
        if value is None:
            return Verdict.COULD_NOT_RUN
        if value < self.fail_below:
            return Verdict.FAIL
        if value < self.warn_below:
            return Verdict.WARN
        return Verdict.PASS


class Measurement(PublicModel):
    """One figure a per-node suite measured on a node (or across `hosts`, launched from `launcher`): its value, the
    series behind it (an nvbandwidth matrix, HPL-MxP's progress, a soak's samples), and its verdict with evidence."""

    run = models.ForeignKey(BenchmarkRun, on_delete=models.CASCADE, related_name="measurements")
    round = models.ForeignKey(Round, null=True, blank=True, on_delete=models.CASCADE, related_name="measurements")
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="benchmark_measurements")
    launcher = models.CharField(max_length=253)
    hosts = models.JSONField(default=list, help_text="Host names measured together, launcher first.")
    hosts_key = models.CharField(max_length=2000, help_text="Sorted host names joined by commas: the baseline scope.")
    sku_name = models.CharField(max_length=64, blank=True)
    suite = models.CharField(max_length=16, choices=Suite.choices)
    case = models.CharField(max_length=64)
    unit = models.CharField(max_length=16)
    value = models.FloatField(null=True, blank=True)
    series = models.JSONField(default=dict, blank=True)
    reference = models.ForeignKey(
        MeasurementReference, null=True, blank=True, on_delete=models.SET_NULL, related_name="measurements"
    )
    expected = models.FloatField(null=True, blank=True)
    warn_below = models.FloatField(null=True, blank=True)
    fail_below = models.FloatField(null=True, blank=True)
    baseline = models.ForeignKey(
        "benchmarks.MeasurementBaseline", null=True, blank=True, on_delete=models.SET_NULL, related_name="compared"
    )
    baseline_value = models.FloatField(null=True, blank=True)
    z_score = models.FloatField(null=True, blank=True)
    verdict = models.CharField(max_length=16, choices=Verdict.choices, default=Verdict.COULD_NOT_RUN)
    evidence = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["run", "round__index", "launcher", "case", "id"]
        constraints = [
            models.UniqueConstraint(fields=["job", "launcher", "case"], name="measurement_unique_per_job_case"),
            models.CheckConstraint(condition=Q(verdict__in=Verdict.values), name="measurement_verdict_known"),
        ]

    def __str__(self) -> str:
        return f"{'+'.join(self.hosts)} {self.case}: {self.value} {self.unit} ({self.verdict})"

    @property
    def colour(self) -> str:
        return VERDICT_COLOURS[self.verdict]

    @property
    def pct_expected(self) -> float | None:
        if self.value is None or not self.expected:
            return None
        return round(100 * self.value / self.expected, 1)

    @property
    def pct_baseline(self) -> float | None:
        """(value − baseline) / baseline in %: negative is worse than the accepted baseline."""
        if self.value is None or not self.baseline_value:
            return None
        return round(100 * (self.value - self.baseline_value) / self.baseline_value, 1)

    @property
    def baseline_change(self) -> str:
        """The change against the accepted baseline in words: "+2.1 %", "−3.4 %", "as the baseline" ("0.0 %" under a
        "% baseline" heading read as nothing of it)."""
        return baseline_change(self.pct_baseline)

    @property
    def regressed(self) -> bool:
        pct = self.pct_baseline
        return pct is not None and pct < -REGRESSION_PCT


class MeasurementBaseline(PublicModel):
    """The accepted value of a figure for a scope (suite and case over a set of hosts)."""

    suite = models.CharField(max_length=16, choices=Suite.choices)
    case = models.CharField(max_length=64)
    hosts_key = models.CharField(max_length=2000)
    measurement = models.ForeignKey(Measurement, on_delete=models.CASCADE, related_name="baselines")
    value = models.FloatField()
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="measurement_baselines"
    )

    class Meta:
        ordering = ["suite", "case", "hosts_key"]
        constraints = [
            models.UniqueConstraint(fields=["suite", "case", "hosts_key"], name="measurement_baseline_unique_scope")
        ]

    def __str__(self) -> str:
        return f"{self.suite} {self.case} {self.hosts_key}: {self.value:g}"


# --- timeline analysis ------------------------------------------------------------------------------------------


class TimelineAnalysisQuerySet(models.QuerySet):
    def recent(self) -> "TimelineAnalysisQuerySet":
        return self.order_by("-created", "-id")

    def visible_to(self, user) -> "TimelineAnalysisQuerySet":
        if user is None or not user.is_authenticated:
            return self.none()
        return self


class TimelineAnalysis(PublicModel):
    """A training timeline (PyTorch profiler Chrome traces, one per rank, or a Horovod timeline) broken down into
    compute, communication, overlap and idle time per step and per rank (apps.parsers.timeline_steps). The shares
    are of the step time over every rank and step; `series` holds each rank with its steps."""

    name = models.CharField(max_length=200)
    origin = models.CharField(max_length=16, choices=TimelineOrigin.choices, default=TimelineOrigin.UPLOAD)
    training_job = models.ForeignKey(
        "workloads.TrainingJob", null=True, blank=True, on_delete=models.SET_NULL, related_name="timeline_analyses"
    )
    job = models.ForeignKey(
        "jobs.Job",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="timeline_analyses",
        help_text="The timeline-trace job that read the files off their nodes (origin node).",
    )
    files = models.JSONField(default=list, blank=True, help_text="Each file read: name, bytes, decompressed, rank.")
    rank_count = models.PositiveIntegerField(default=0)
    world_size = models.PositiveIntegerField(null=True, blank=True)
    step_count = models.PositiveIntegerField(default=0)
    step_us = models.FloatField(help_text="Mean step time over every rank and step, µs.")
    compute_share = models.FloatField(null=True, blank=True)
    communication_share = models.FloatField(null=True, blank=True)
    overlap_share = models.FloatField(null=True, blank=True)
    exposed_communication_share = models.FloatField(null=True, blank=True)
    idle_share = models.FloatField(null=True, blank=True)
    slowest_rank = models.PositiveIntegerField(null=True, blank=True)
    slowest_rank_compute_pct_above_median = models.FloatField(null=True, blank=True)
    series = models.JSONField(default=dict, blank=True, help_text="ranks: each with its steps.")
    notes = models.JSONField(default=list, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="timeline_analyses"
    )

    objects = TimelineAnalysisQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(origin__in=TimelineOrigin.values), name="timeline_analysis_origin_known")
        ]

    def __str__(self) -> str:
        return f"timeline {self.name}"

    @property
    def communication_pct(self) -> float | None:
        return None if self.communication_share is None else round(100 * self.communication_share, 1)

    @property
    def exposed_communication_pct(self) -> float | None:
        share = self.exposed_communication_share
        return None if share is None else round(100 * share, 1)


class TraceUpload(models.Model):
    """An uploaded trace file waiting for its `timeline-analysis` job (a large upload is analysed by a worker, on any
    host, not in the request); deleted when the job ends."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="trace_uploads")
    position = models.PositiveSmallIntegerField(help_text="Rank order, as uploaded.")
    name = models.CharField(max_length=255)
    content = models.BinaryField()

    class Meta:
        ordering = ["job", "position"]
        constraints = [models.UniqueConstraint(fields=["job", "position"], name="trace_upload_unique_position")]

    def __str__(self) -> str:
        return self.name
