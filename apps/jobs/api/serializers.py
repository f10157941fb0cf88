from drf_spectacular.extensions import OpenApiSerializerExtension, OpenApiSerializerFieldExtension
from rest_framework import serializers
from rest_framework.reverse import reverse

from apps.core.api import EveryBadField, detail_url, page_url
from apps.inventory.choices import NodeRole
from apps.jobs.choices import JOB_STATUS_COLOURS, STEP_STATUS_COLOURS
from apps.jobs.kinds import KINDS, not_startable_message, startable_kind_names
from apps.jobs.models import Artifact, Job, JobEvent, JobStep
from apps.nodeexec.transports import TRANSPORT_NAMES


class TargetsSerializer(serializers.Serializer):
    nodes = serializers.ListField(
        child=serializers.CharField(max_length=253, trim_whitespace=False),  # " " is a name that matches nothing
        required=False,
        max_length=100000,
        help_text="Node public ids or host names.",
    )
    racks = serializers.ListField(
        child=serializers.CharField(max_length=100, trim_whitespace=False),
        required=False,
        help_text="Rack public ids or names: all their nodes.",
    )
    tags = serializers.ListField(child=serializers.SlugField(), required=False, help_text="Tag slugs.")
    role = serializers.ChoiceField(
        choices=NodeRole.choices, required=False, help_text="Only nodes of this role (alone: every node of the role)."
    )

    def validate(self, attrs):
        if not any(attrs.get(key) for key in ("nodes", "racks", "tags", "role")):
            raise serializers.ValidationError("Name nodes, racks, tags or a role.")
        return attrs


# What a target needs: at least one of these (JSON Schema's anyOf, as TargetsSerializer.validate checks it).
TARGET_CHOICES = [
    {"required": ["nodes"], "properties": {"nodes": {"minItems": 1}}},
    {"required": ["racks"], "properties": {"racks": {"minItems": 1}}},
    {"required": ["tags"], "properties": {"tags": {"minItems": 1}}},
    {"required": ["role"]},
]


class TargetsSerializerExtension(OpenApiSerializerExtension):
    target_class = TargetsSerializer

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_basic_serializer(self.target, direction)
        return {**schema, "anyOf": TARGET_CHOICES} if direction == "request" else schema


class KindField(serializers.CharField):
    """A registered job kind that may be started directly; the schema lists them (read when it is generated: kinds
    register as apps load). A kind that starts only through its approved object is refused, saying where."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if value not in KINDS:
            raise serializers.ValidationError(f"Unknown job kind; known: {', '.join(startable_kind_names())}.")
        if KINDS[value].started_through:
            raise serializers.ValidationError(not_startable_message(value))
        return value


class KindFieldExtension(OpenApiSerializerFieldExtension):
    target_class = KindField

    def map_serializer_field(self, auto_schema, direction):
        return {"type": "string", "enum": startable_kind_names()}


class KindParametersField(serializers.JSONField):
    """A job's parameters: an object the kind named by `kind` validates (JobKind.parameters)."""


class KindParametersFieldExtension(OpenApiSerializerFieldExtension):
    target_class = KindParametersField

    def map_serializer_field(self, auto_schema, direction):
        # One component per kind that takes parameters: the schema cannot say which goes with which `kind`, so it
        # offers each (anyOf); the kind's own serializer judges them (400 naming the parameter).
        shapes = {KINDS[name].parameters for name in startable_kind_names() if KINDS[name].parameters().fields}
        refs = [auto_schema.resolve_serializer(shape, direction).ref for shape in sorted(shapes, key=_qualname)]
        return {"type": "object", "anyOf": refs}


def _qualname(cls) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class JobCreateSerializer(EveryBadField, serializers.Serializer):
    kind = KindField(max_length=64, help_text="A registered job kind, e.g. shell-check or sleep.")
    targets = TargetsSerializer()
    parameters = KindParametersField(
        required=False, default=dict, help_text="The parameters of the kind named by `kind` (one of these objects)."
    )
    transport = serializers.ChoiceField(choices=TRANSPORT_NAMES, required=False)

    def errors_beyond_shape(self, passed: dict, refused: set[str]) -> dict:
        from apps.jobs import services

        targets = passed.get("targets")
        return services.request_errors(
            kind=passed.get("kind"),
            targets=services.TargetSpec.of(targets) if targets is not None else None,
            parameters=passed.get("parameters", {}),
            transport=passed.get("transport"),
        )


class ProgressSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    done = serializers.IntegerField()
    percent = serializers.IntegerField()


class JobSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    colour = serializers.SerializerMethodField()
    requested_by = serializers.SlugRelatedField(
        slug_field="username",
        read_only=True,
        allow_null=True,
        help_text="Null for jobs the system started (schedules).",
    )
    progress = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField(help_text="The job in the API.")
    page = serializers.SerializerMethodField(help_text="The job's page in the portal.")

    class Meta:
        model = Job
        fields = [
            "id",
            "url",
            "page",
            "kind",
            "status",
            "colour",
            "transport",
            "parameters",
            "target_spec",
            "node_count",
            "shard_count",
            "requested_by",
            "created",
            "started",
            "finished",
            "heartbeat",
            "cancel_requested",
            "summary",
            "last_seq",
            "progress",
        ]
        read_only_fields = fields

    def get_colour(self, job) -> str:
        return JOB_STATUS_COLOURS.get(job.status, "grey")

    def get_url(self, job) -> str:
        return detail_url(job, self.context.get("request"))

    def get_page(self, job) -> str:
        return page_url("job-page", job, self.context.get("request"))

    @staticmethod
    def _progress(job) -> dict:
        total = getattr(job, "steps_total", None)
        if total is None:
            from apps.jobs.events import progress_of

            return {k: v for k, v in progress_of(job.pk).items() if k != "counts"}
        done = job.steps_done
        return {"total": total, "done": done, "percent": round(100 * done / total) if total else 0}

    def get_progress(self, job) -> ProgressSerializer:
        return self._progress(job)


# drf-spectacular reads the return annotation of get_progress: point it at the serializer.
JobSerializer.get_progress.__annotations__["return"] = ProgressSerializer


class JobEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = JobEvent
        fields = ["seq", "created", "level", "hostname", "step", "message", "data"]
        read_only_fields = fields


class EventPageSerializer(serializers.Serializer):
    job_status = serializers.CharField()
    last_seq = serializers.IntegerField(help_text="Highest seq written so far.")
    more = serializers.BooleanField(help_text="True when events after the last one returned exist: ask again.")
    events = JobEventSerializer(many=True)


class ArtifactSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    truncated = serializers.BooleanField(read_only=True)
    download = serializers.SerializerMethodField()

    class Meta:
        model = Artifact
        fields = ["id", "stream", "size_bytes", "stored_bytes", "cap_bytes", "truncated", "download"]
        read_only_fields = fields

    def get_download(self, artifact) -> str:
        return artifact_url(self.context["job"], artifact, self.context.get("request"))


def artifact_url(job, artifact, request) -> str:
    """Where the API serves a step's output (absolute, given the request, as every `url` is)."""
    return reverse("api:job-artifact", args=[job.public_id, artifact.public_id], request=request)


class JobStepSerializer(serializers.ModelSerializer):
    colour = serializers.SerializerMethodField()
    artifacts = serializers.SerializerMethodField()

    class Meta:
        model = JobStep
        fields = [
            "hostname",
            "step",
            "position",
            "label",
            "status",
            "colour",
            "exit_code",
            "started",
            "finished",
            "summary",
            "artifacts",
        ]
        read_only_fields = fields

    def get_colour(self, step) -> str:
        return STEP_STATUS_COLOURS.get(step.status, "grey")

    def get_artifacts(self, step) -> ArtifactSerializer(many=True):
        return ArtifactSerializer(step.artifacts.all(), many=True, context=self.context).data
