"""SSH access profiles over the API: admins write them, viewers read them; the private key is write-only."""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import RegexValidator
from django.db import transaction
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.core.filters import FilterSet
from apps.core.validators import HOST, host_validator
from apps.inventory.api.serializers import COMMON, NODE_REF, TIMESTAMPS, BriefRelatedField, InventorySerializer
from apps.inventory.api.views import InventoryViewSet, stable
from apps.inventory.filters import RefFilter, StrictBooleanFilter, node_ref, site_ref
from apps.inventory.models import Rack, Site, SshAccess
from apps.inventory.models.access import _USER, check_private_key, parse_public_keys, validate_login_user

LOGIN = _USER.pattern.removesuffix("\\Z")
LOGIN_PATTERN = RegexValidator(f"^(?:{LOGIN})$")
LOGIN_OR_EMPTY_PATTERN = RegexValidator(f"^(?:{LOGIN})?$")
HOST_OR_EMPTY_PATTERN = RegexValidator(rf"^{HOST}?\Z", host_validator.message)  # "": no jump host


class SshAccessSerializer(InventorySerializer):
    """How Rackpilot logs in to the nodes of one site, rack or node (the most specific profile wins).

    `private_key` is write-only: send it to set or replace the key, send "" to remove it, leave it out to keep it.
    It is stored encrypted and never returned; `has_private_key` says whether one is set.
    """

    scope = serializers.SerializerMethodField()
    site = BriefRelatedField(queryset=Site.objects.all(), natural_key="slug", required=False, allow_null=True)
    rack = BriefRelatedField(queryset=Rack.objects.all(), natural_key="name", required=False, allow_null=True)
    node = BriefRelatedField(**NODE_REF, required=False, allow_null=True)
    private_key = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=20000,
        style={"input_type": "password"},
        help_text="OpenSSH or PEM private key, unencrypted. Write-only.",
    )
    has_private_key = serializers.BooleanField(read_only=True)

    class Meta:
        model = SshAccess
        fields = [
            *COMMON,
            "scope",
            "site",
            "rack",
            "node",
            "user",
            "port",
            "private_key",
            "has_private_key",
            "sudo",
            "jump_host",
            "jump_port",
            "jump_user",
            "jump_host_keys",
            *TIMESTAMPS,
        ]
        # No silent trimming: "ops\n" is refused by the field's full-match pattern, not turned into "ops".
        extra_kwargs = {name: {"trim_whitespace": False} for name in ("user", "jump_host", "jump_user")}
        # The login names' rule as a pattern the schema shows (the model's validator is a function it cannot read).
        extra_kwargs["user"]["validators"] = [validate_login_user, LOGIN_PATTERN]
        extra_kwargs["jump_user"]["validators"] = [validate_login_user, LOGIN_OR_EMPTY_PATTERN]
        extra_kwargs["jump_host"]["validators"] = [HOST_OR_EMPTY_PATTERN]  # validate_host's rule, as a pattern

    @extend_schema_field(serializers.ChoiceField(choices=["site", "rack", "node"]))
    def get_scope(self, obj) -> str:
        return obj.scope

    def validate_private_key(self, value: str) -> str:
        if not value.strip():
            return ""
        try:
            return check_private_key(value)
        except DjangoValidationError as error:  # its message never quotes the key
            raise serializers.ValidationError(error.messages) from None

    def validate_jump_host_keys(self, value: str) -> str:
        # The model's clean() normalises the keys, but on a copy (ValidatedModelSerializer): keep them normalised here.
        try:
            return "\n".join(parse_public_keys(value))
        except DjangoValidationError as error:
            raise serializers.ValidationError(error.messages) from None

    def validate(self, attrs):
        private_key = attrs.pop("private_key", None)
        attrs = super().validate(attrs)
        if private_key is not None:
            attrs["private_key"] = private_key
        return attrs

    @transaction.atomic
    def create(self, validated_data):
        private_key = validated_data.pop("private_key", None)
        instance = SshAccess(**validated_data)
        if private_key is not None:
            instance.set_private_key(private_key)
        instance.save()
        return instance

    @transaction.atomic
    def update(self, instance, validated_data):
        private_key = validated_data.pop("private_key", None)
        for name, value in validated_data.items():
            setattr(instance, name, value)
        if private_key is not None:
            instance.set_private_key(private_key)
        instance.save()
        return instance


class SshAccessFilterSet(FilterSet):
    site = site_ref()
    rack = RefFilter(queryset=Rack.objects.all(), natural_key="name", label="Rack name or public id")
    node = node_ref()
    sudo = StrictBooleanFilter()

    class Meta:
        model = SshAccess
        fields = ["site", "rack", "node", "user", "sudo"]


class SshAccessViewSet(InventoryViewSet):
    queryset = stable(SshAccess.objects.select_related("site", "rack", "node"))
    serializer_class = SshAccessSerializer
    filterset_class = SshAccessFilterSet
