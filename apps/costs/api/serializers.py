from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from apps.accounts.choices import Role
from apps.core.api import ReferenceField
from apps.core.validators import name_validator
from apps.costs import services as policies
from apps.costs.choices import ApprovalKind, PolicyKind, PolicyScope, PolicyState
from apps.costs.models import CostPolicy, PolicyAction
from apps.costs.policies import tiering
from apps.costs.policies.base import POLICY_KINDS, policy_kind
from apps.inventory.models import Rack
from apps.monitoring.choices import WORKLOAD_KINDS
from apps.workloads.models import InferenceService


def _every_kind_parameters() -> type[serializers.Serializer]:
    """Every kind's parameters, each optional and without its default: the schema of `parameters`. Which of them a
    policy takes, and which it needs, is its kind's (docs/costs.md); the kind checks them."""
    fields = {}
    for spec in POLICY_KINDS.values():
        for name, field in spec.parameters().fields.items():
            kwargs = {key: value for key, value in field._kwargs.items() if key not in ("default", "required")}
            fields.setdefault(name, type(field)(*field._args, required=False, **kwargs))
    doc = "The kind's parameters: " + "; ".join(
        f"{spec.name}: {', '.join(spec.parameters().fields)}" for spec in POLICY_KINDS.values()
    )
    return type(
        "CostPolicyParametersSerializer",
        (serializers.Serializer,),
        {**fields, "__doc__": doc, "to_internal_value": _refusing_unknown},
    )


def _refusing_unknown(self, data):
    """A name no kind takes is refused (a serializer would drop it); a name of another kind is the kind's to refuse."""
    unknown = sorted(set(data) - set(self.fields)) if isinstance(data, dict) else []
    if unknown:
        raise serializers.ValidationError({name: ["Unknown parameter."] for name in unknown})
    return serializers.Serializer.to_internal_value(self, data)


CostPolicyParametersSerializer = _every_kind_parameters()


class CostPolicySerializer(serializers.Serializer):
    """A cost or energy policy. `rack` and `service` by name or public id; `parameters` checked against the scope's
    GPU SKUs (the power limit within each one's min–max). Standing approval is an admin's to give."""

    id = serializers.UUIDField(source="public_id", read_only=True)
    name = serializers.CharField(max_length=100, validators=[name_validator])
    kind = serializers.ChoiceField(choices=PolicyKind.choices, default=PolicyKind.LOW_LOAD_POWER)
    scope = serializers.ChoiceField(choices=PolicyScope.choices, default=PolicyScope.CLUSTER)
    rack = ReferenceField(queryset=Rack.objects.all(), natural_key="name", required=False, allow_null=True)
    service = ReferenceField(
        queryset=InferenceService.objects.all(), natural_key="name", required=False, allow_null=True
    )
    parameters = CostPolicyParametersSerializer()
    standing_approval = serializers.BooleanField(
        default=False, help_text="Apply proposals without asking; only an admin may turn it on or off."
    )
    state = serializers.ChoiceField(choices=PolicyState.choices, default=PolicyState.ENABLED)
    created_by = serializers.CharField(source="created_by.username", read_only=True, allow_null=True, default=None)
    last_evaluated = serializers.DateTimeField(read_only=True, allow_null=True)
    last_outcome = serializers.CharField(read_only=True)
    created = serializers.DateTimeField(read_only=True)
    updated = serializers.DateTimeField(read_only=True)

    def validate_name(self, value):
        others = CostPolicy.objects.filter(name=value)
        if self.instance is not None:
            others = others.exclude(pk=self.instance.pk)
        if others.exists():
            raise serializers.ValidationError("A cost policy with this name exists already.")
        return value

    def validate(self, attrs):
        current = {}
        if self.instance is not None:
            current = {field: getattr(self.instance, field) for field in ("kind", "scope", "rack", "service")}
            current["parameters"] = self.instance.parameters
            current["standing_approval"] = self.instance.standing_approval
        merged = {**current, **attrs}
        user = self.context["request"].user
        if merged.get("standing_approval", False) != current.get("standing_approval", False) and not user.has_role(
            Role.ADMIN
        ):
            raise serializers.ValidationError(
                {"standing_approval": ["Only an admin may give or take standing approval."]}
            )
        probe = CostPolicy(
            kind=merged.get("kind"), scope=merged.get("scope"), rack=merged.get("rack"), service=merged.get("service")
        )
        try:
            probe.clean()
        except DjangoValidationError as error:
            raise serializers.ValidationError(error.message_dict) from None
        try:
            attrs["parameters"] = policies.check_parameters(
                kind=merged["kind"], parameters=dict(merged["parameters"]), nodes=probe.nodes(), policy=probe
            )
        except serializers.ValidationError as error:
            scope = {field: error.detail[field] for field in ("scope", "rack", "service") if field in error.detail}
            raise serializers.ValidationError(scope or {"parameters": error.detail}) from None
        return attrs

    def create(self, validated_data):
        return CostPolicy.objects.create(**validated_data, created_by=self.context["request"].user)

    def update(self, instance, validated_data):
        for field, value in validated_data.items():
            setattr(instance, field, value)
        instance.save()
        return instance


class PlanRowSerializer(serializers.Serializer):
    """One row of a plan: a GPU's power limit (energy at low load) or a file to move (storage tiering)."""

    hostname = serializers.CharField()
    gpu = serializers.IntegerField(required=False)
    sku = serializers.CharField(required=False)
    from_w = serializers.IntegerField(required=False, help_text="The limit in force when proposed (telemetry).")
    to_w = serializers.IntegerField(required=False, help_text="The limit applying sets.")
    default_w = serializers.IntegerField(required=False, help_text="The default limit reverting puts back (the TDP).")
    mean_util = serializers.FloatField(required=False, help_text="Mean utilisation over the window (%).")
    mean_power_w = serializers.FloatField(required=False)
    saving_w = serializers.FloatField(required=False, help_text="Expected mean draw saved at the window's load.")
    full_load_clock = serializers.FloatField(required=False, help_text="Share of the busy clock kept under full load.")
    source = serializers.CharField(required=False, help_text="Storage tiering: the file where it is.")
    destination = serializers.CharField(required=False, help_text="Storage tiering: where applying moves it.")
    size_bytes = serializers.IntegerField(required=False, help_text="Storage tiering: its size (find %s).")
    atime = serializers.FloatField(required=False, help_text="Storage tiering: its last read (epoch s, find %A@).")


class MovedFileSerializer(serializers.Serializer):
    source = serializers.CharField(help_text="Where the file was (and where reverting puts it back).")
    destination = serializers.CharField(help_text="Where applying moved it.")
    size_bytes = serializers.IntegerField()


class DirectoryShareSerializer(serializers.Serializer):
    directory = serializers.CharField()
    files = serializers.IntegerField()
    bytes = serializers.IntegerField()


class FilesSummarySerializer(serializers.Serializer):
    files = serializers.IntegerField(help_text="How many files the plan moves.")
    bytes = serializers.IntegerField(help_text="How many bytes.")
    top_directories = DirectoryShareSerializer(many=True, help_text="The directories holding most of those bytes.")


class ScalingPlanRowSerializer(serializers.Serializer):
    service = serializers.CharField()
    deployment = serializers.CharField(help_text="The service's Kubernetes name (the Deployment the scaler targets).")
    direction = serializers.ChoiceField(choices=[("out", "Scale out"), ("in", "Scale in")])
    replicas_before = serializers.IntegerField()
    replicas_after = serializers.IntegerField()
    replicas_field_before = serializers.IntegerField(allow_null=True, help_text="What reverting puts back.")
    nodes_before = serializers.ListField(child=serializers.CharField())
    nodes_after = serializers.ListField(child=serializers.CharField())
    changed_nodes = serializers.ListField(child=serializers.CharField(), help_text="Freed (in) or added (out).")
    mean_util = serializers.FloatField(help_text="Mean GPU utilisation of the serving nodes over the window (%).")
    low_util = serializers.FloatField(help_text="The window's lowest step (%).")
    high_util = serializers.FloatField(help_text="The window's highest step (%).")
    expected_util_after = serializers.FloatField(help_text="The mean spread over the new replica count (%).")
    idle_power_w = serializers.FloatField(help_text="Idle draw of the changed nodes' GPUs.")
    saving_w = serializers.FloatField(help_text="Freed idle draw (negative: scaling out costs it).")
    threshold_up = serializers.FloatField()
    threshold_down = serializers.FloatField()
    window_minutes = serializers.IntegerField()
    cool_down_minutes = serializers.IntegerField()
    min_replicas = serializers.IntegerField()
    max_replicas = serializers.IntegerField()


class SpotPlanRowSerializer(serializers.Serializer):
    workload = serializers.CharField()
    workload_kind = serializers.ChoiceField(choices=WORKLOAD_KINDS)
    deployment = serializers.CharField(help_text="The workload's Kubernetes name.")
    hostnames = serializers.ListField(child=serializers.CharField(), help_text="The nodes to taint as spot.")
    energy_kwh_per_day = serializers.FloatField(help_text="Their GPUs' energy over the window, per day.")
    saving_kwh_per_day = serializers.FloatField(help_text="energy_kwh_per_day × spot_discount.")
    spot_discount = serializers.FloatField()


PLAN_ROW = PolymorphicProxySerializer(
    component_name="PolicyPlanRow",
    serializers=[PlanRowSerializer, ScalingPlanRowSerializer, SpotPlanRowSerializer],
    resource_type_field_name=None,
    many=True,
)


class PolicyArtefactSerializer(serializers.Serializer):
    name = serializers.CharField()
    filename = serializers.CharField()
    media_type = serializers.CharField()
    description = serializers.CharField()
    content = serializers.CharField(help_text="The file, validated (Kubernetes objects, or Slurm lines).")


class PolicyActionSerializer(serializers.ModelSerializer):
    """What a policy proposed: the exact commands per node, the expected saving, approval and run history."""

    id = serializers.UUIDField(source="public_id", read_only=True)
    policy = serializers.SlugRelatedField(slug_field="name", read_only=True)
    plan = serializers.SerializerMethodField(help_text="Per GPU (power limits), per service or per workload.")
    artefacts = serializers.SerializerMethodField(help_text="Files to apply to a real cluster (scaling, spot).")
    commands = serializers.DictField(child=serializers.ListField(child=serializers.CharField()), read_only=True)
    revert_commands = serializers.DictField(child=serializers.ListField(child=serializers.CharField()), read_only=True)
    notes = serializers.ListField(child=serializers.CharField(), read_only=True)
    expected_money_per_day = serializers.FloatField(read_only=True)
    approved_by = serializers.CharField(source="approved_by_name", read_only=True)
    # Blank until approved: "" is one of its values (read-only fields lose the model's blank).
    approval = serializers.ChoiceField(choices=ApprovalKind.choices, allow_blank=True, read_only=True)
    apply_job = serializers.SlugRelatedField(slug_field="public_id", read_only=True, allow_null=True)
    revert_job = serializers.SlugRelatedField(slug_field="public_id", read_only=True, allow_null=True)
    manifest = MovedFileSerializer(many=True, read_only=True, help_text="Storage tiering: what applying moved.")
    files = serializers.SerializerMethodField(help_text="Storage tiering: the plan's count, bytes and top directories.")

    class Meta:
        model = PolicyAction
        fields = [
            "id",
            "policy",
            "state",
            "trigger",
            "reason",
            "plan",
            "commands",
            "revert_commands",
            "notes",
            "window_seconds",
            "expected_kwh_per_day",
            "expected_money_per_day",
            "price_per_kwh",
            "currency",
            "throughput_factor",
            "approval",
            "approved_by",
            "approved_at",
            "apply_job",
            "revert_job",
            "applied_at",
            "reapplied_at",
            "reapplied_count",
            "reverted_at",
            "revert_reason",
            "message",
            "artefacts",
            "manifest",
            "files",
            "created",
        ]
        read_only_fields = fields

    @extend_schema_field(PLAN_ROW)
    def get_plan(self, action) -> list:
        return action.plan

    @extend_schema_field(PolicyArtefactSerializer(many=True))
    def get_artefacts(self, action) -> list:
        return [vars(artefact) for artefact in policy_kind(action.policy.kind).artefacts(action)]

    @extend_schema_field(FilesSummarySerializer(allow_null=True))
    def get_files(self, action) -> dict | None:
        return tiering.summary(action.plan) if action.policy.kind == PolicyKind.STORAGE_TIERING else None


class PolicyActionRefSerializer(serializers.Serializer):
    action = serializers.UUIDField(
        required=False, help_text="Which action of the policy; default: the newest one this step applies to."
    )
    reason = serializers.CharField(required=False, allow_blank=True, max_length=200, help_text="Revert only.")
