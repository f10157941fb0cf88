from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from apps.inventory.api.serializers import NODE_REF, BriefRelatedField
from apps.monitoring import bmcs
from apps.monitoring.choices import BmcProtocol, PollResult
from apps.monitoring.models import Bmc, BmcReading
from apps.monitoring.validation import (
    PASSWORD_MAX_CHARS,
    validate_bmc_address,
    validate_bmc_user,
    validate_password,
)


def _checked(validator):
    def check(value):
        try:
            validator(value)
        except DjangoValidationError as error:
            raise serializers.ValidationError(error.messages) from None

    return check


class BmcSerializer(serializers.Serializer):
    """A node's BMC settings and how its last read went.

    `password` is write-only: send it to set or replace the password, leave it out (or send "") to keep it, send
    `clear_password: true` to forget it. It is stored encrypted and never returned; `has_password` says whether one
    is set. `address` is the node's bmc_address in the inventory.
    """

    id = serializers.UUIDField(source="public_id", read_only=True)
    node = BriefRelatedField(**NODE_REF)
    address = serializers.CharField(max_length=253, trim_whitespace=False, validators=[_checked(validate_bmc_address)])
    protocol = serializers.ChoiceField(choices=BmcProtocol.choices, default=BmcProtocol.IPMI)
    port = serializers.IntegerField(min_value=1, max_value=65535, required=False, allow_null=True, default=None)
    user = serializers.CharField(max_length=64, trim_whitespace=False, validators=[_checked(validate_bmc_user)])
    password = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=PASSWORD_MAX_CHARS,
        style={"input_type": "password"},
        help_text="Write-only; stored encrypted.",
    )
    clear_password = serializers.BooleanField(write_only=True, required=False, default=False)
    has_password = serializers.BooleanField(read_only=True)
    verify_tls = serializers.BooleanField(default=True)
    last_polled = serializers.DateTimeField(read_only=True)
    last_result = serializers.ChoiceField(choices=PollResult.choices, read_only=True)
    last_message = serializers.CharField(read_only=True)
    polls_ok = serializers.IntegerField(read_only=True)
    polls_partial = serializers.IntegerField(read_only=True)
    polls_failed = serializers.IntegerField(read_only=True)

    def validate_node(self, node):
        if self.instance is not None and node.pk != self.instance.node_id:
            raise serializers.ValidationError("A BMC stays with its node: change the settings of the other node's BMC.")
        if self.instance is None and Bmc.objects.filter(node=node).exists():
            raise serializers.ValidationError(f"{node.hostname} has BMC settings already: change those.")
        return node

    def validate(self, attrs):
        password = attrs.get("password") or ""
        protocol = attrs.get("protocol") or getattr(self.instance, "protocol", BmcProtocol.IPMI)
        if password:
            try:
                validate_password(password, protocol)
            except DjangoValidationError as error:
                raise serializers.ValidationError({"password": error.messages}) from None
            if attrs.get("clear_password"):
                raise serializers.ValidationError({"clear_password": ["Give a new password or clear it, not both."]})
        return attrs

    def save_settings(self, node, values: dict) -> Bmc:
        current = self.instance
        try:
            return bmcs.save_bmc(
                node=node,
                address=values.get("address", node.bmc_address),
                protocol=values.get("protocol", getattr(current, "protocol", BmcProtocol.IPMI)),
                port=values.get("port", getattr(current, "port", None)),
                user=values.get("user", getattr(current, "user", "")),
                verify_tls=values.get("verify_tls", getattr(current, "verify_tls", True)),
                password=values.get("password") or "",
                clear_password=values.get("clear_password", False),
            )
        except DjangoValidationError as error:
            raise serializers.ValidationError(error.message_dict) from None

    def create(self, validated_data):
        return self.save_settings(validated_data["node"], validated_data)

    def update(self, instance, validated_data):
        return self.save_settings(instance.node, validated_data)


class BmcReadingSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node.hostname", read_only=True)

    class Meta:
        model = BmcReading
        fields = ["node", "time", "kind", "sensor", "unit", "value"]
