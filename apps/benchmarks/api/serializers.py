from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.benchmarks.choices import (
    BURN_IN_MAX_SECONDS,
    BURN_IN_MIN_SECONDS,
    CASE_STUDY_COMMUNICATION_PCT,
    HPL_MAX_N,
    HPL_MIN_N,
    ITERATIONS,
    MAX_BYTES,
    MAX_ITERATIONS,
    MIN_BYTES,
    NODE_SUITE_TRANSPORTS,
    RUN_STATUS_COLOURS,
    TIMELINE_MAX_FILE_BYTES,
    TIMELINE_MAX_FILES,
    TIMELINE_MAX_TRACE_BYTES,
    VERDICT_COLOURS,
    BurnLoad,
    Collective,
    ComputeBasis,
    Suite,
)
from apps.benchmarks.kinds import TraceFileSerializer
from apps.benchmarks.models import (
    BenchmarkRun,
    BenchmarkTest,
    Measurement,
    MeasurementReference,
    Reference,
    Suspect,
    TimelineAnalysis,
)
from apps.benchmarks.timelines import DEFAULT_PROFILED_STEPS, MAX_PROFILED_STEPS
from apps.core.api import ReferenceField
from apps.workloads.models import TrainingJob


class BenchmarkRunCreateSerializer(serializers.Serializer):
    """What POST /api/benchmarks/ takes; the service checks the rest (sizes, GPUs, SKUs, host keys)."""

    suite = serializers.ChoiceField(choices=Suite.choices)
    nodes = serializers.ListField(child=serializers.CharField(max_length=253), required=False, default=list)
    racks = serializers.ListField(child=serializers.CharField(max_length=100), required=False, default=list)
    tags = serializers.ListField(child=serializers.SlugField(), required=False, default=list)
    collective = serializers.ChoiceField(choices=Collective.choices, default=Collective.ALL_REDUCE)
    min_bytes = serializers.IntegerField(min_value=MIN_BYTES, max_value=MAX_BYTES, default=MIN_BYTES)
    max_bytes = serializers.IntegerField(
        min_value=MIN_BYTES, max_value=MAX_BYTES, default=MAX_BYTES, help_text="At most 16 GiB."
    )
    iterations = serializers.IntegerField(
        min_value=1, max_value=MAX_ITERATIONS, default=ITERATIONS, help_text="NCCL suites: nccl-tests -n per size."
    )
    transport = serializers.ChoiceField(
        choices=NODE_SUITE_TRANSPORTS, required=False, help_text="local: the per-node suites only, one node."
    )
    cooldown_seconds = serializers.FloatField(min_value=0, max_value=3600, default=5.0)
    duration_seconds = serializers.IntegerField(
        min_value=BURN_IN_MIN_SECONDS, max_value=BURN_IN_MAX_SECONDS, required=False, help_text="burn-in: the soak."
    )
    hpl_n = serializers.IntegerField(
        min_value=HPL_MIN_N, max_value=HPL_MAX_N, required=False, help_text="hpl-mxp: N (default: fits the memory)."
    )
    burn_load = serializers.ChoiceField(
        choices=BurnLoad.choices, default=BurnLoad.GPU_BURN, help_text="burn-in: gpu_burn or dcgmi diag -r 3/4."
    )

    def validate(self, attrs):
        if not (attrs["nodes"] or attrs["racks"] or attrs["tags"]):
            raise serializers.ValidationError({"nodes": ["Name nodes, racks or tags."]})
        if attrs["min_bytes"] > attrs["max_bytes"]:
            raise serializers.ValidationError({"min_bytes": ["The smallest size is above the largest."]})
        return attrs


class SuspectSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    node = serializers.CharField(source="node.hostname", read_only=True)

    class Meta:
        model = Suspect
        fields = [
            "id",
            "node",
            "nic",
            "cable",
            "switch",
            "switch_port",
            "cause",
            "busbw_gb_per_s",
            "expected_gb_per_s",
            "verdict",
        ]
        read_only_fields = fields


class BenchmarkRunSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    colour = serializers.SerializerMethodField()
    nodes = serializers.SlugRelatedField(slug_field="hostname", many=True, read_only=True)
    requested_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    accepted_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    canceled_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    suspects = SuspectSerializer(many=True, read_only=True)
    jobs = serializers.SerializerMethodField()

    class Meta:
        model = BenchmarkRun
        fields = [
            "id",
            "suite",
            "collective",
            "status",
            "colour",
            "summary",
            "parameters",
            "transport",
            "target_spec",
            "nodes",
            "sku_name",
            "fabric",
            "round_count",
            "round_bound",
            "test_count",
            "suspects",
            "jobs",
            "requested_by",
            "accepted_by",
            "accepted_at",
            "cancel_requested",
            "canceled_by",
            "started",
            "finished",
            "created",
        ]
        read_only_fields = fields

    def get_colour(self, run) -> str:
        return RUN_STATUS_COLOURS.get(run.status, "grey")

    def get_jobs(self, run) -> list[str]:
        return [str(round_.job.public_id) for round_ in run.rounds.all() if round_.job_id]


class SeriesRowSerializer(serializers.Serializer):
    size_bytes = serializers.IntegerField()
    count = serializers.IntegerField()
    time_us = serializers.FloatField(allow_null=True)
    algbw_gb_per_s = serializers.FloatField(allow_null=True)
    busbw_gb_per_s = serializers.FloatField(allow_null=True)
    in_place_busbw_gb_per_s = serializers.FloatField(allow_null=True)
    wrong = serializers.IntegerField(allow_null=True)


class NicFindingSerializer(serializers.Serializer):
    nic = serializers.CharField()
    device = serializers.CharField()
    rail_busbw_gb_per_s = serializers.FloatField(allow_null=True)
    slow_rail = serializers.BooleanField()
    problems = serializers.ListField(child=serializers.CharField())


class BenchmarkTestSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    job = serializers.UUIDField(source="job.public_id", read_only=True)
    round = serializers.SerializerMethodField()
    hosts = serializers.ListField(child=serializers.CharField(), read_only=True)
    series = SeriesRowSerializer(many=True, read_only=True)
    rails = serializers.DictField(child=serializers.FloatField(allow_null=True), read_only=True)
    nic_findings = NicFindingSerializer(many=True, read_only=True)
    pct_expected = serializers.FloatField(read_only=True, allow_null=True)
    pct_baseline = serializers.FloatField(read_only=True, allow_null=True)
    regressed = serializers.BooleanField(read_only=True)
    colour = serializers.SerializerMethodField()
    evidence = serializers.DictField(read_only=True)

    class Meta:
        model = BenchmarkTest
        fields = [
            "id",
            "job",
            "round",
            "launcher",
            "hosts",
            "purpose",
            "subject",
            "partner",
            "collective",
            "size_bytes",
            "busbw_gb_per_s",
            "avg_busbw_gb_per_s",
            "expected_gb_per_s",
            "warn_gb_per_s",
            "fail_gb_per_s",
            "pct_expected",
            "baseline_gb_per_s",
            "pct_baseline",
            "regressed",
            "z_score",
            "verdict",
            "colour",
            "evidence",
            "series",
            "rails",
            "nic_findings",
            "created",
        ]
        read_only_fields = fields

    def get_round(self, test) -> int | None:
        return test.round.index + 1 if test.round_id else None

    def get_colour(self, test) -> str:
        return VERDICT_COLOURS.get(test.verdict, "grey")


class ReferenceSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)

    class Meta:
        model = Reference
        fields = [
            "id",
            "sku_name",
            "fabric",
            "scope",
            "collective",
            "min_size_bytes",
            "expected_gb_per_s",
            "warn_gb_per_s",
            "fail_gb_per_s",
            "source",
            "updated",
        ]
        read_only_fields = ["id", "sku_name", "fabric", "scope", "collective", "updated"]

    def validate(self, attrs):
        fail = attrs.get("fail_gb_per_s", getattr(self.instance, "fail_gb_per_s", 0))
        warn = attrs.get("warn_gb_per_s", getattr(self.instance, "warn_gb_per_s", 0))
        expected = attrs.get("expected_gb_per_s", getattr(self.instance, "expected_gb_per_s", 0))
        if not 0 <= fail <= warn <= expected:
            raise serializers.ValidationError({"warn_gb_per_s": ["Tiers must satisfy 0 ≤ fail ≤ warn ≤ expected."]})
        return attrs


class MeasurementSerializer(serializers.ModelSerializer):
    """One figure of a per-node suite; `series` is the suite's own: an nvbandwidth matrix (`matrix`, `rows`,
    `columns`), HPL-MxP's settings and residuals, or a soak's per-GPU samples (`gpus`: t, temperature_c, sm_mhz,
    power_w, reasons)."""

    id = serializers.UUIDField(source="public_id", read_only=True)
    job = serializers.UUIDField(source="job.public_id", read_only=True)
    round = serializers.SerializerMethodField()
    hosts = serializers.ListField(child=serializers.CharField(), read_only=True)
    series = serializers.DictField(read_only=True)
    evidence = serializers.DictField(read_only=True)
    pct_expected = serializers.FloatField(read_only=True, allow_null=True)
    pct_baseline = serializers.FloatField(read_only=True, allow_null=True)
    regressed = serializers.BooleanField(read_only=True)

    class Meta:
        model = Measurement
        fields = [
            "id",
            "job",
            "round",
            "launcher",
            "hosts",
            "sku_name",
            "suite",
            "case",
            "unit",
            "value",
            "expected",
            "warn_below",
            "fail_below",
            "pct_expected",
            "baseline_value",
            "pct_baseline",
            "regressed",
            "z_score",
            "verdict",
            "evidence",
            "series",
            "created",
        ]
        read_only_fields = fields

    def get_round(self, item) -> int | None:
        return item.round.index + 1 if item.round_id else None


class MeasurementReferenceSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)

    class Meta:
        model = MeasurementReference
        fields = [
            "id",
            "sku_name",
            "suite",
            "case",
            "unit",
            "expected",
            "warn_below",
            "fail_below",
            "source",
            "updated",
        ]
        read_only_fields = ["id", "sku_name", "suite", "case", "unit", "updated"]

    def validate(self, attrs):
        fail = attrs.get("fail_below", getattr(self.instance, "fail_below", 0))
        warn = attrs.get("warn_below", getattr(self.instance, "warn_below", 0))
        expected = attrs.get("expected", getattr(self.instance, "expected", 0))
        if not 0 <= fail <= warn <= expected:
            raise serializers.ValidationError({"warn_below": ["Tiers must satisfy 0 ≤ fail ≤ warn ≤ expected."]})
        return attrs


# --- timeline analysis ------------------------------------------------------------------------------------------


class TimelineStepSerializer(serializers.Serializer):
    step = serializers.CharField(help_text='The ProfilerStep number, or "all" for a trace without step marks.')
    start_us = serializers.FloatField()
    duration_us = serializers.FloatField()
    compute_us = serializers.FloatField()
    communication_us = serializers.FloatField()
    overlap_us = serializers.FloatField()
    idle_us = serializers.FloatField()


class TimelineRankSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    source = serializers.CharField(help_text="The file the rank was read from.")
    compute_basis = serializers.ChoiceField(choices=ComputeBasis.values)
    events = serializers.IntegerField()
    truncated = serializers.BooleanField()
    step_us = serializers.FloatField(help_text="Mean step time, µs (and the others: mean per step).")
    compute_us = serializers.FloatField()
    communication_us = serializers.FloatField()
    overlap_us = serializers.FloatField()
    idle_us = serializers.FloatField()
    communication_share = serializers.FloatField(allow_null=True)
    exposed_communication_share = serializers.FloatField(allow_null=True)
    compute_share = serializers.FloatField(allow_null=True)
    idle_share = serializers.FloatField(allow_null=True)
    steps = TimelineStepSerializer(many=True)


class TimelineFileSerializer(serializers.Serializer):
    name = serializers.CharField()
    bytes = serializers.IntegerField()
    decompressed_bytes = serializers.IntegerField()
    events = serializers.IntegerField()
    rank = serializers.IntegerField(allow_null=True)


class CaseStudySerializer(serializers.Serializer):
    before = serializers.FloatField(help_text="The brief's case study: communication share before its fixes, %.")
    after = serializers.FloatField()


class TimelineAnalysisSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    training_job = serializers.CharField(source="training_job.name", read_only=True, allow_null=True, default=None)
    job = serializers.UUIDField(
        source="job.public_id", read_only=True, allow_null=True, default=None, help_text="The job that read the files."
    )
    requested_by = serializers.CharField(source="requested_by.username", read_only=True, allow_null=True, default=None)
    case_study_communication_pct = serializers.SerializerMethodField()
    files = TimelineFileSerializer(many=True, read_only=True)
    notes = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = TimelineAnalysis
        fields = [
            "id",
            "name",
            "origin",
            "training_job",
            "job",
            "files",
            "rank_count",
            "world_size",
            "step_count",
            "step_us",
            "compute_share",
            "communication_share",
            "overlap_share",
            "exposed_communication_share",
            "idle_share",
            "slowest_rank",
            "slowest_rank_compute_pct_above_median",
            "case_study_communication_pct",
            "notes",
            "requested_by",
            "created",
        ]
        read_only_fields = fields

    @extend_schema_field(CaseStudySerializer)
    def get_case_study_communication_pct(self, obj) -> dict:
        return CASE_STUDY_COMMUNICATION_PCT


class TimelineSeriesSerializer(serializers.Serializer):
    analysis = serializers.UUIDField()
    ranks = TimelineRankSerializer(many=True)


class TimelineUploadSerializer(serializers.Serializer):
    """multipart/form-data: one or more `files` (one rank's trace each, or a Horovod timeline), and a name."""

    files = serializers.ListField(
        child=serializers.FileField(allow_empty_file=False),
        min_length=1,
        max_length=TIMELINE_MAX_FILES,
        help_text=".json or .json.gz: PyTorch profiler Chrome traces (one per rank) or a Horovod timeline; "
        f"each at most {TIMELINE_MAX_FILE_BYTES // 2**20} MiB as sent, {TIMELINE_MAX_TRACE_BYTES // 2**20} MiB "
        "decompressed.",
    )
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class TimelineFromNodesSerializer(serializers.Serializer):
    # A ListField, not many=True: the schema states its bounds (minItems, maxItems) only for a ListField.
    files = serializers.ListField(
        child=TraceFileSerializer(),  # the kind's own: the schema shows the path pattern the job checks
        min_length=1,
        max_length=TIMELINE_MAX_FILES,
        help_text="In rank order (a trace's own rank wins).",
    )
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    training_job = ReferenceField(
        queryset=TrainingJob.objects.all(),
        natural_key="name",
        required=False,
        allow_null=True,
        default=None,
        help_text="The training job the traces belong to (its name or public id), if any.",
    )
    transport = serializers.ChoiceField(
        choices=[("ssh", "ssh")], default="ssh", help_text="Over ssh only: never the worker's own host (local)."
    )


class TimelineFromJobSerializer(serializers.Serializer):
    training_job = ReferenceField(
        queryset=TrainingJob.objects.all(), natural_key="name", help_text="Its name or public id."
    )
    steps = serializers.IntegerField(min_value=1, max_value=MAX_PROFILED_STEPS, default=DEFAULT_PROFILED_STEPS)
