from functools import cached_property

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from apps.core.api import ReferenceField
from apps.core.validators import host_validator
from apps.health.choices import NodeState, Severity, Source
from apps.inventory.api.serializers import NODE_REF, BriefRelatedField
from apps.inventory.models import NvlinkSwitchTray, Rack
from apps.monitoring.bmc.logins import (
    PASSWORD_MAX_CHARS,
    SWITCH_TRAY_REDFISH_ONLY,
    bmc_user_validator,
    password_characters_validator,
    save_bmc,
    validate_password,
)
from apps.monitoring.choices import WORKLOAD_KINDS, BmcProtocol, PollResult
from apps.monitoring.models import Bmc, BmcReading, Slo
from apps.nodeexec.bmc import POWER_ACTIONS
from apps.workloads.models import InferenceService, TrainingJob


class BmcSerializer(serializers.Serializer):
    """The BMC settings of a node or of an NVLink switch tray (give one: `node` or `switch_tray`), and how its last
    read went.

    `password` is write-only: send it to set or replace the password, leave it out (or send "") to keep it, send
    `clear_password: true` to forget it. It is stored encrypted and never returned; `has_password` says whether one
    is set. `address` is the node's (or switch tray's) bmc_address in the inventory. A switch tray's BMC is read over
    Redfish only.
    """

    id = serializers.UUIDField(source="public_id", read_only=True)
    node = BriefRelatedField(**NODE_REF, required=False, allow_null=True, help_text="The node; null for a switch tray.")
    switch_tray = serializers.SlugRelatedField(
        slug_field="name",
        queryset=NvlinkSwitchTray.objects.all(),
        required=False,
        allow_null=True,
        help_text="The NVLink switch tray, by name (nvl01-sw3); null for a node.",
        error_messages={"does_not_exist": "No NVLink switch tray matches {value}."},
    )
    address = serializers.CharField(max_length=253, trim_whitespace=False, validators=[host_validator])
    protocol = serializers.ChoiceField(choices=BmcProtocol.choices, default=BmcProtocol.IPMI)
    port = serializers.IntegerField(min_value=1, max_value=65535, required=False, allow_null=True, default=None)
    user = serializers.CharField(max_length=64, trim_whitespace=False, validators=[bmc_user_validator])
    password = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=PASSWORD_MAX_CHARS,
        validators=[password_characters_validator],
        style={"input_type": "password"},
        help_text="Write-only; stored encrypted.",
    )
    clear_password = serializers.BooleanField(write_only=True, required=False, default=False)
    has_password = serializers.BooleanField(read_only=True)
    verify_tls = serializers.BooleanField(default=True)
    last_polled = serializers.DateTimeField(read_only=True, allow_null=True, help_text="Null until the first poll.")
    last_result = serializers.ChoiceField(choices=PollResult.choices, read_only=True, allow_blank=True)
    last_message = serializers.CharField(read_only=True)
    polls_ok = serializers.IntegerField(read_only=True)
    polls_partial = serializers.IntegerField(read_only=True)
    polls_failed = serializers.IntegerField(read_only=True)

    def validate_node(self, node):
        return self._owner("node", node)

    def validate_switch_tray(self, tray):
        return self._owner("switch_tray", tray)

    def _owner(self, field: str, owner):
        """A BMC stays with what it belongs to; a new one for something that has one already is refused."""
        if self.instance is not None and getattr(owner, "pk", None) != getattr(self.instance, f"{field}_id"):
            raise serializers.ValidationError(
                "A BMC stays with its node or switch tray: change the settings of the other one's BMC."
            )
        if self.instance is None and owner is not None and Bmc.objects.filter(**{field: owner}).exists():
            raise serializers.ValidationError(f"{owner} has BMC settings already: change those.")
        return owner

    def validate(self, attrs):
        if self.instance is None and (attrs.get("node") is None) == (attrs.get("switch_tray") is None):
            raise serializers.ValidationError(
                {"node": ["Name the node or the NVLink switch tray (switch_tray) the BMC belongs to, one of them."]}
            )
        password = attrs.get("password") or ""
        protocol = attrs.get("protocol") or getattr(self.instance, "protocol", BmcProtocol.IPMI)
        switch_tray = attrs.get("switch_tray") or getattr(self.instance, "switch_tray", None)
        if switch_tray is not None and protocol != BmcProtocol.REDFISH:
            raise serializers.ValidationError({"protocol": [SWITCH_TRAY_REDFISH_ONLY]})
        if password:
            try:
                validate_password(password, protocol)
            except DjangoValidationError as error:
                raise serializers.ValidationError({"password": error.messages}) from None
            if attrs.get("clear_password"):
                raise serializers.ValidationError({"clear_password": ["Give a new password or clear it, not both."]})
        return attrs

    def save_settings(self, owner, values: dict) -> Bmc:
        current = self.instance
        which = "switch_tray" if isinstance(owner, NvlinkSwitchTray) else "node"
        try:
            return save_bmc(
                **{which: owner},
                address=values.get("address", owner.bmc_address),
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
        return self.save_settings(validated_data.get("node") or validated_data["switch_tray"], validated_data)

    def update(self, instance, validated_data):
        return self.save_settings(instance.owner, validated_data)


class BmcReadingSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node.hostname", read_only=True, allow_null=True)
    switch_tray = serializers.CharField(source="switch_tray.name", read_only=True, allow_null=True)

    class Meta:
        model = BmcReading
        fields = ["node", "switch_tray", "time", "kind", "sensor", "unit", "value"]


class SloSerializer(serializers.ModelSerializer):
    """An SLO; the service and training job by name, the rack by its id. The model's rules name the bad field."""

    id = serializers.UUIDField(source="public_id", read_only=True)
    service = ReferenceField(
        queryset=InferenceService.objects.all(), natural_key="name", required=False, allow_null=True
    )
    training_job = ReferenceField(
        queryset=TrainingJob.objects.all(), natural_key="name", required=False, allow_null=True
    )
    rack = ReferenceField(queryset=Rack.objects.all(), required=False, allow_null=True)

    class Meta:
        model = Slo
        fields = ["id", "name", "objective", "scope", "service", "training_job", "rack", "target", "compliance"]

    def validate(self, attrs):
        instance = Slo(**{**self._current(), **attrs})
        try:
            instance.clean()
        except DjangoValidationError as error:
            raise serializers.ValidationError(error.message_dict) from None
        return attrs

    def _current(self) -> dict:
        if self.instance is None:
            return {}
        return {field: getattr(self.instance, field) for field in self.Meta.fields if field != "id"}


class SloBudgetSerializer(serializers.Serializer):
    window = serializers.CharField()
    judged = serializers.IntegerField()
    good = serializers.IntegerField()
    no_data = serializers.IntegerField()
    compliance = serializers.FloatField(allow_null=True)
    budget_remaining = serializers.FloatField(
        allow_null=True, help_text="The error budget left, 0 to 1 (0: exhausted; how far past it: budget_spent)."
    )
    budget_spent = serializers.FloatField(
        allow_null=True, help_text="The budget's multiples spent in the window: 1 = all of it, 6.7 = 6.7x over."
    )
    budget_text = serializers.CharField(help_text='The budget in words: "42 % left" or "exhausted, 6.7x over".')
    burn_rate = serializers.FloatField(allow_null=True)
    met = serializers.BooleanField(allow_null=True)


class SloGpuSerializer(serializers.Serializer):
    gpu = serializers.CharField(help_text="The GPU's index on its node.")
    mean_util = serializers.FloatField(help_text="Mean DCGM_FI_DEV_GPU_UTIL over the window, %.")
    mean_sm_clock_mhz = serializers.FloatField(allow_null=True)


class SloIncidentSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id")
    title = serializers.CharField()
    state = serializers.CharField()


class SloFailingTestSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=[("pair", "A multi-node test whose latest result failed"), ("suspect", "A sweep's suspect")]
    )
    hosts = serializers.ListField(child=serializers.CharField())
    collective = serializers.CharField()
    busbw_gb_per_s = serializers.FloatField(allow_null=True)
    expected_gb_per_s = serializers.FloatField(allow_null=True)
    run = serializers.CharField(help_text="The benchmark run's id; blank for a test outside a run.")
    cable = serializers.CharField(help_text="A suspect's NIC, cable, switch and port; blank for a pair.")


class SloDraggerSerializer(serializers.Serializer):
    node = serializers.CharField(source="node.hostname")
    mean_util = serializers.FloatField(help_text="Mean GPU utilisation of the node over the blame window, %.")
    mean_sm_clock_mhz = serializers.FloatField(allow_null=True)
    tokens_per_second = serializers.FloatField(
        allow_null=True, help_text="Its share of the service's tokens/s (by utilisation x SM clock); null otherwise."
    )
    drag = serializers.FloatField(help_text="What it costs the SLO: tokens/s short of an even share, or points.")
    drag_unit = serializers.ChoiceField(choices=[("tokens/s", "tokens/s"), ("points", "points of utilisation")])
    reporting = serializers.BooleanField(help_text="False: none of its GPUs reported in the window.")
    gpus = SloGpuSerializer(many=True, help_text="Its two GPUs with the lowest utilisation.")
    open_incidents = serializers.IntegerField()
    incidents = SloIncidentSerializer(many=True)
    failing_tests = SloFailingTestSerializer(many=True)


class SloStatusSerializer(serializers.Serializer):
    error = serializers.CharField()
    latest = serializers.FloatField(allow_null=True)
    budgets = SloBudgetSerializer(many=True)
    blame_window = serializers.CharField(help_text="The shortest window that missed, else 1h: the draggers' window.")
    draggers = SloDraggerSerializer(many=True)


class NodeHealthEventSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id", help_text="The event at /api/health-events/{id}/.")
    component = serializers.CharField(source="component_label")
    kind = serializers.CharField()
    severity = serializers.ChoiceField(choices=Severity.choices)
    source = serializers.ChoiceField(choices=Source.choices)
    summary = serializers.CharField()
    last_seen = serializers.DateTimeField()


class NodeHealthSerializer(serializers.Serializer):
    node = serializers.CharField(source="hostname")
    healthy = serializers.BooleanField(help_text="False: keep work off it (a critical or major event, its status…).")
    state = serializers.ChoiceField(choices=NodeState.choices, help_text="Degraded: only minor findings.")
    reasons = serializers.ListField(child=serializers.CharField())
    events = NodeHealthEventSerializer(many=True, help_text="Its open health events, worst and newest first.")

    @cached_property
    def _events(self):
        # One for the whole answer: a serializer copies its declared fields when it is made, which for each node
        # with events was a quarter of the answer's serializing at 2,048 nodes.
        return NodeHealthEventSerializer(many=True)

    def to_representation(self, health):
        # The fields above, written out: a fleet's answer holds thousands of nodes, and DRF's field-by-field walk
        # cost half of it at 2,048 (bench/pages.py); the declared fields stay the schema.
        events = self._events.to_representation(health.events) if health.events else []
        return {
            "node": health.hostname,
            "healthy": health.healthy,
            "state": str(health.state),
            "reasons": [str(reason) for reason in health.reasons],
            "events": events,
        }


class HealthPartSerializer(serializers.Serializer):
    part = serializers.CharField()
    weight = serializers.IntegerField()
    share = serializers.FloatField()
    counted = serializers.CharField()


class FleetHealthSerializer(serializers.Serializer):
    score = serializers.IntegerField(help_text="0 to 100: the weighted parts below.")
    breakdown = HealthPartSerializer(many=True)
    nodes = NodeHealthSerializer(many=True, help_text="Every compute node, in production or not.")
    not_in_production = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Compute nodes the number does not judge, by status: still being brought up (planned, racked, "
        "provisioning) or retired. Their entries in `nodes` say they are not healthy to a scheduler.",
    )


class GpuHoursSplitSerializer(serializers.Serializer):
    gpus = serializers.IntegerField(help_text="GPUs counted.")
    gpu_hours = serializers.FloatField(help_text="Every GPU-hour of the window: busy + allocated_idle + unallocated.")
    busy = serializers.FloatField(help_text="GPU-hours weighted by SM active (DCGM_FI_PROF_SM_ACTIVE).")
    allocated_idle = serializers.FloatField(help_text="GPU-hours a workload held but did not use.")
    unallocated = serializers.FloatField(help_text="GPU-hours no workload held.")
    busy_share = serializers.FloatField(allow_null=True, help_text="0..1 of gpu_hours; null without GPUs.")
    idle_share = serializers.FloatField(allow_null=True, help_text="Allocated but idle, 0..1 of gpu_hours.")
    unallocated_share = serializers.FloatField(allow_null=True)


def _split(row: dict) -> dict:
    return row["split"].as_dict()


class GpuHoursWorkloadSerializer(GpuHoursSplitSerializer):
    kind = serializers.ChoiceField(choices=WORKLOAD_KINDS)
    name = serializers.CharField()


class GpuHoursNodeSerializer(GpuHoursSplitSerializer):
    node = serializers.CharField(help_text="The node's host name.")
    rack = serializers.CharField(allow_null=True, help_text="The rack's name; null for a node in no rack.")
    workload = serializers.CharField(help_text="The workload holding the node at the window's end; blank: none.")


class GpuHoursRackSerializer(GpuHoursSplitSerializer):
    rack = serializers.CharField()


class GpuHoursSerializer(serializers.Serializer):
    window = serializers.CharField()
    start = serializers.FloatField(help_text="Unix time.")
    end = serializers.FloatField(help_text="Unix time.")
    source = serializers.ChoiceField(choices=[("prometheus", "Prometheus"), ("simulator", "Simulator")])
    cluster = GpuHoursSplitSerializer()
    workloads = GpuHoursWorkloadSerializer(many=True)
    nodes = GpuHoursNodeSerializer(many=True)
    racks = GpuHoursRackSerializer(many=True)

    @staticmethod
    def represent(name: str, result) -> dict:
        return {
            "window": name,
            "start": result.window.start,
            "end": result.window.end,
            "source": result.source,
            "cluster": result.cluster.as_dict(),
            "workloads": [{"kind": r["kind"], "name": r["name"], **_split(r)} for r in result.workloads],
            "nodes": [
                {
                    "node": r["node"].hostname,
                    "rack": r["rack"].name if r["rack"] else None,
                    "workload": r["workload"],
                    **_split(r),
                }
                for r in result.nodes
            ],
            "racks": [{"rack": r["rack"].name, **_split(r)} for r in result.racks],
        }


class BmcPowerSerializer(serializers.Serializer):
    """POST /api/nodes/{id}/bmc-power/: what to tell the node's BMC, and why (kept in the audit log)."""

    action = serializers.ChoiceField(
        choices=POWER_ACTIONS, help_text="status reads only; off, cycle, reset take it down."
    )
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=300)
