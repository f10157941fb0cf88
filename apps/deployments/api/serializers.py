from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.core.api import EveryBadField, ReferenceField
from apps.deployments import criteria, services
from apps.deployments.api import schemas
from apps.deployments.choices import Outcome, WizardStage
from apps.deployments.models import (
    AcceptanceCriterion,
    Approval,
    ClusterAcceptanceCheck,
    Deployment,
    Suggestion,
    Verdict,
)
from apps.jobs import services as job_services
from apps.jobs.api.serializers import TargetsSerializer


@extend_schema_field(schemas.options_schema(strict=True), component_name="DeploymentOptionsEdit")
class OptionsEditField(serializers.JSONField):
    """Edits of a plan's options: checked by the services (options.errors), documented by schemas.options_schema."""


@extend_schema_field(schemas.criteria_schema(strict=True), component_name="AcceptanceCriteriaEdit")
class CriteriaEditField(serializers.JSONField):
    """Edits of a plan's acceptance criteria: checked by criteria.errors."""


@extend_schema_field(schemas.options_schema(strict=False), component_name="DeploymentOptions")
class OptionsField(serializers.JSONField):
    pass


@extend_schema_field(schemas.criteria_schema(strict=False), component_name="AcceptanceCriteria")
class CriteriaField(serializers.JSONField):
    pass


class DeploymentCreateSerializer(EveryBadField, serializers.Serializer):
    name = serializers.CharField(
        max_length=64,
        trim_whitespace=False,
        validators=[RegexValidator(f"^(?:{services.NAME.pattern})$")],  # the service's rule, shown in the schema
        help_text="Letters, digits, . _ - ; unique.",
    )
    description = serializers.CharField(required=False, allow_blank=True, default="")
    targets = TargetsSerializer(help_text="The nodes: names, racks or tags.")
    options = OptionsEditField(
        required=False, default=dict, help_text="Edits of the pre-filled options, by section (versions, baselines ...)."
    )
    criteria = CriteriaEditField(required=False, default=dict, help_text="Edits of the acceptance criteria.")
    transport = serializers.ChoiceField(choices=["ssh", "sim"], required=False, default="")

    def errors_beyond_shape(self, passed: dict, refused: set[str]) -> dict:
        return services.creation_errors(
            name=passed.get("name"),
            targets=_targets(passed),
            option_edits=passed.get("options"),
            criteria_edits=passed.get("criteria"),
            transport=passed.get("transport"),
        )


class DeploymentUpdateSerializer(EveryBadField, serializers.Serializer):
    """A change to a draft; the context's `deployment` is the draft (its checks judge the fields that passed)."""

    description = serializers.CharField(required=False, allow_blank=True)
    targets = TargetsSerializer(required=False)
    options = OptionsEditField(required=False)
    criteria = CriteriaEditField(required=False)
    stage = serializers.ChoiceField(choices=WizardStage.choices, required=False)

    def errors_beyond_shape(self, passed: dict, refused: set[str]) -> dict:
        return services.update_errors(
            deployment=self.context["deployment"],
            targets=_targets(passed),
            option_edits=passed.get("options"),
            criteria_edits=passed.get("criteria"),
            stage=passed.get("stage"),
        )


def _targets(passed: dict) -> job_services.TargetSpec | None:
    return job_services.TargetSpec.of(passed["targets"]) if passed.get("targets") is not None else None


class ApproveSerializer(serializers.Serializer):
    steps = serializers.ListField(
        child=serializers.CharField(max_length=40),
        required=False,
        default=list,
        help_text="Disruptive steps approved up front on every node where their check finds work.",
    )


class StartSerializer(serializers.Serializer):
    check_only = serializers.BooleanField(
        required=False, default=False, help_text="Read and judge only; apply nothing on the nodes."
    )


class RunSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    resume = serializers.BooleanField()
    job = serializers.UUIDField(source="job.public_id")
    status = serializers.CharField(source="job.status")
    started_by = serializers.CharField(source="started_by.username", default="")
    created = serializers.DateTimeField()


class DeploymentSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    state_label = serializers.CharField(
        source="get_state_display",
        read_only=True,
        help_text='The state as the pages name it (the state `failed` reads "Needs attention").',
    )
    colour = serializers.CharField(read_only=True, help_text="The state's colour on the pages.")
    nodes = serializers.SlugRelatedField(slug_field="hostname", many=True, read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    approved_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    runs = RunSerializer(many=True, read_only=True)
    options = OptionsField(read_only=True)
    criteria = CriteriaField(read_only=True)

    class Meta:
        model = Deployment
        fields = [
            "id",
            "name",
            "description",
            "state",
            "state_label",
            "colour",
            "stage",
            "target_spec",
            "nodes",
            "options",
            "criteria",
            "transport",
            "created_by",
            "approved_by",
            "approved_at",
            "runs",
            "created",
            "updated",
        ]
        read_only_fields = fields


class VerdictSerializer(serializers.ModelSerializer):
    run = serializers.IntegerField(source="run.number", read_only=True)
    check = serializers.CharField(source="check_name", read_only=True)
    colour = serializers.CharField(read_only=True, help_text="The state's colour on the pages.")

    class Meta:
        model = Verdict
        fields = [
            "run",
            "hostname",
            "step",
            "check",
            "subject",
            "outcome",
            "colour",
            "value",
            "criterion",
            "threshold",
            "reference",
            "reference_label",
            "unit",
            "attempts",
            "evidence",
            "created",
        ]
        read_only_fields = fields


class SuggestionSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    deployment = serializers.UUIDField(source="deployment.public_id", read_only=True)
    run = serializers.IntegerField(source="run.number", read_only=True)
    decided_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    colour = serializers.CharField(read_only=True, help_text="The state's colour on the pages.")

    class Meta:
        model = Suggestion
        fields = [
            "id",
            "deployment",
            "run",
            "hostname",
            "step",
            "problem",
            "subject",
            "title",
            "cause",
            "next_check",
            "fix",
            "fix_commands",
            "remediation_step",
            "evidence",
            "state",
            "colour",
            "decided_by",
            "decided_at",
            "created",
        ]
        read_only_fields = fields


class ApprovalSerializer(serializers.ModelSerializer):
    approved_by = serializers.CharField(source="approved_by_name", read_only=True)
    suggestion = serializers.UUIDField(source="suggestion.public_id", read_only=True, allow_null=True, default=None)

    class Meta:
        model = Approval
        fields = ["scope", "step", "hostnames", "commands", "suggestion", "approved_by", "created"]
        read_only_fields = fields


class AcceptanceCriterionSerializer(serializers.ModelSerializer):
    sku = ReferenceField(
        natural_key="name",
        queryset=AcceptanceCriterion._meta.get_field("sku").related_model.objects.all(),
        required=False,
        allow_null=True,
        default=None,  # so the unique (check, SKU) validator reads a missing SKU as the defaults' row
        help_text="GPU SKU name or public id; none: the defaults.",
    )
    check = serializers.ChoiceField(source="check_name", choices=sorted(criteria.DEFAULTS))

    class Meta:
        model = AcceptanceCriterion
        fields = ["id", "sku", "check", *criteria.FIELDS]
        read_only_fields = ["id"]
        # criteria.errors' ranges, stated on the fields so the schema shows them.
        extra_kwargs = {
            "threshold": {"min_value": 0},
            "warn_threshold": {"min_value": 0},
            "retries": {"min_value": 0, "max_value": 10},
            "cooldown_seconds": {"min_value": 0, "max_value": 600},
        }

    def validate(self, attrs):
        check_name = attrs.get("check_name", getattr(self.instance, "check_name", ""))
        values = {key: value for key, value in attrs.items() if key in criteria.FIELDS}
        problems = criteria.errors({check_name: values})
        if problems:
            raise serializers.ValidationError(
                {key.split(".")[-1] if key.count(".") == 2 else "check": [msg] for key, msg in problems.items()}
            )
        return attrs


class ClusterCheckSerializer(serializers.ModelSerializer):
    """One check of phase 5, cluster acceptance (multi-node NCCL, the sweep, HPL-MxP) of the latest attempt."""

    check = serializers.CharField(source="check_name", read_only=True)
    run = serializers.IntegerField(source="run.number", read_only=True)
    benchmark_run = serializers.UUIDField(source="benchmark_run.public_id", read_only=True, allow_null=True)
    # Blank until the check is judged: "" is one of its values (read-only fields lose the model's blank).
    outcome = serializers.ChoiceField(choices=Outcome.choices, allow_blank=True, read_only=True)
    details = serializers.JSONField(
        read_only=True, help_text="Figures: busbw and series (NCCL), suspects, rounds and pairs (sweep), measurements."
    )

    class Meta:
        model = ClusterAcceptanceCheck
        fields = [
            "check",
            "run",
            "attempt",
            "status",
            "outcome",
            "value",
            "criterion",
            "summary",
            "benchmark_run",
            "details",
            "started",
            "finished",
        ]
        read_only_fields = fields
