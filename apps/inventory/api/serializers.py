"""Serializers of the inventory API.

Objects are addressed by `public_id`. A reference to another object is written as its public id or its natural key
(a node's hostname, a site's or tag's slug, a rack's, SKU's, switch's or storage tier's name, a NIC as
`hostname:name`, a GPU as `hostname:index`; a name several objects share needs the public id) and read back as a
brief `{id, url, display}`. Fields are listed explicitly; nothing here runs a query: the viewsets' querysets load
what `display` and the nested lists need.
"""

from django.core.validators import MaxLengthValidator, RegexValidator
from django.db.models import GenericIPAddressField
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.core.api import ReferenceField, ValidatedModelSerializer, detail_url, reference_schema
from apps.core.validators import ip_address_validator
from apps.inventory.choices import PowerState, allowed_next_statuses
from apps.inventory.hostkeys import fingerprint_of
from apps.inventory.models import (
    Cable,
    Firmware,
    Gpu,
    GpuSku,
    Nic,
    Node,
    Pdu,
    Rack,
    Site,
    SshHostKey,
    StorageTier,
    Switch,
    Tag,
    Volume,
)


def brief(obj, request) -> dict:
    return {"id": obj.public_id, "url": detail_url(obj, request), "display": str(obj)}


class BriefSerializer(serializers.Serializer):
    """How one object refers to another: enough to show it and to follow it."""

    id = serializers.UUIDField(source="public_id")
    url = serializers.URLField()
    display = serializers.CharField()


class BriefRelatedField(ReferenceField):
    """A reference: written as a public id or the natural key (if the model has one), read as a brief object."""

    def to_representation(self, value) -> dict:
        return brief(value, self.context.get("request"))


class BriefRelatedFieldExtension(OpenApiSerializerFieldExtension):
    """Documents a reference as a string on the way in and as a Brief object on the way out."""

    target_class = BriefRelatedField

    def map_serializer_field(self, auto_schema, direction):
        if direction == "response":
            return auto_schema.resolve_serializer(BriefSerializer, direction).ref
        return reference_schema(self.target)


class IpAddressField(serializers.IPAddressField):
    """An IP address as the schema's pattern states it (dotted IPv4, or IPv6 as RFC 4291 writes it: no zone, no
    embedded IPv4): one rule, which drf-spectacular shows, and one message instead of Django's looser check."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.validators = [*(v for v in self.validators if isinstance(v, MaxLengthValidator)), ip_address_validator]


class InventorySerializer(ValidatedModelSerializer):
    """Every inventory object shows its public id, its API URL and how it reads in a list."""

    serializer_field_mapping = {
        **ValidatedModelSerializer.serializer_field_mapping,
        GenericIPAddressField: IpAddressField,
    }

    id = serializers.UUIDField(source="public_id", read_only=True)
    url = serializers.SerializerMethodField()
    display = serializers.SerializerMethodField()

    def get_validators(self) -> list:
        # The model's own checks (full_clean) cover uniqueness, with messages that name the field where they can;
        # DRF's generic unique-together validator would answer first, with a vaguer message.
        return []

    @extend_schema_field(OpenApiTypes.URI)
    def get_url(self, obj) -> str:
        return detail_url(obj, self.context.get("request"))

    def get_display(self, obj) -> str:
        return str(obj)  # not a source="__str__" field: DRF inspects the signature of a callable source every time


COMMON = ["id", "url", "display"]
TIMESTAMPS = ["created", "updated"]


class SiteSerializer(InventorySerializer):
    """A data centre or hall holding racks."""

    class Meta:
        model = Site
        fields = [*COMMON, "name", "slug", "description", *TIMESTAMPS]


class RackPowerSerializer(serializers.Serializer):
    """The rack's power in watts: its budget, the full-load estimate, and the draw its nodes' and NVLink switch
    trays' BMCs last read."""

    budget_w = serializers.FloatField(read_only=True)
    full_load_w = serializers.IntegerField(
        read_only=True,
        help_text="Every GPU at its SKU's TDP, plus the platform figure per node and a full-load figure per NVLink "
        "switch tray.",
    )
    measured_w = serializers.FloatField(
        read_only=True,
        allow_null=True,
        help_text="Null when none of its nodes or switch trays was read in the last 10 minutes.",
    )
    measured_nodes = serializers.IntegerField(read_only=True, help_text="The nodes whose readings make measured_w.")
    measured_switch_trays = serializers.IntegerField(
        read_only=True, help_text="The NVLink switch trays whose readings make measured_w, beside the nodes'."
    )
    over_budget = serializers.BooleanField(
        read_only=True, help_text="Full load or the measured draw exceeds the budget."
    )


class RackSerializer(InventorySerializer):
    """A rack in a row of a site, with its height in U and its power budget."""

    site = BriefRelatedField(queryset=Site.objects.all(), natural_key="slug")
    power = RackPowerSerializer(read_only=True)

    class Meta:
        model = Rack
        fields = [*COMMON, "site", "name", "row", "position", "u_height", "power_budget_kw", "power", *TIMESTAMPS]


class TagSerializer(InventorySerializer):
    """A free label for nodes (a pool, a customer, a maintenance window)."""

    class Meta:
        model = Tag
        fields = [*COMMON, "name", "slug", "colour", *TIMESTAMPS]


class GpuSkuSerializer(InventorySerializer):
    """A GPU model: datasheet figures and the achievable reference values checks are measured against."""

    class Meta:
        model = GpuSku
        fields = [
            *COMMON,
            "name",
            "vendor",
            "architecture",
            "form_factor",
            "hbm_gib",
            "mem_bandwidth_tb_per_s",
            "mem_bandwidth_reference_tb_per_s",
            "nvlink_gb_per_s",
            "tdp_w",
            "min_power_limit_w",
            "bf16_dense_tflops",
            "fp8_dense_tflops",
            "pcie_gen",
            *TIMESTAMPS,
        ]


NODE_REF = {"queryset": Node.objects.all(), "natural_key": "hostname"}


class NodeSerializer(InventorySerializer):
    """A server, with its GPU and NIC counts; the detail view adds what it holds."""

    rack = BriefRelatedField(queryset=Rack.objects.all(), natural_key="name", required=False, allow_null=True)
    site = BriefRelatedField(source="rack.site", read_only=True, allow_null=True)
    gpu_sku = BriefRelatedField(queryset=GpuSku.objects.all(), natural_key="name", required=False, allow_null=True)
    tags = BriefRelatedField(queryset=Tag.objects.all(), natural_key="slug", many=True, required=False)
    gpu_count = serializers.IntegerField(read_only=True)
    nic_count = serializers.IntegerField(read_only=True)
    drained = serializers.SerializerMethodField()
    allowed_next_statuses = serializers.SerializerMethodField()
    # Blank until its BMC is read: "" is one of its values (read-only fields lose the model's blank).
    power_state = serializers.ChoiceField(
        choices=PowerState.choices,
        allow_blank=True,
        read_only=True,
        help_text=Node._meta.get_field("power_state").help_text,
    )

    class Meta:
        model = Node
        fields = [
            *COMMON,
            "hostname",
            "role",
            "status",
            "health_state",
            "power_state",
            "power_state_since",
            "site",
            "rack",
            "u_position",
            "u_height",
            "management_ip",
            "ssh_port",
            "transport",
            "bmc_address",
            "gpu_sku",
            "expected_gpu_count",
            "gpu_count",
            "nic_count",
            "cpu_model",
            "cpu_sockets",
            "cpu_cores",
            "memory_gib",
            "numa_nodes",
            "tags",
            "comments",
            "drained",
            "drained_at",
            "drain_reason",
            "drained_until",
            "allowed_next_statuses",
            *TIMESTAMPS,
        ]
        # Drained through POST .../drain/ and .../undrain/ (an operator's action, audited), not by editing the node.
        read_only_fields = ["drained_at", "drain_reason", "drained_until"]
        extra_kwargs = {"power_state_since": {"help_text": "Since when its BMC reads that power; empty: never read."}}

    def get_drained(self, node) -> bool:
        return node.is_drained

    def get_allowed_next_statuses(self, node) -> list[str]:
        return allowed_next_statuses(node.status)

    def create(self, validated_data):
        node = super().create(validated_data)
        # The list shows counts annotated by the queryset; a node just created has no GPUs or NICs yet.
        node.gpu_count = node.nic_count = 0
        return node


class GpuSerializer(InventorySerializer):
    """One GPU in a node."""

    node = BriefRelatedField(**NODE_REF)
    sku = BriefRelatedField(queryset=GpuSku.objects.all(), natural_key="name")

    class Meta:
        model = Gpu
        fields = [
            *COMMON,
            "node",
            "index",
            "sku",
            "uuid",
            "serial",
            "pci_bus_id",
            "numa_node",
            "pcie_switch",
            "presence",
            "health",
            *TIMESTAMPS,
        ]


class NicSerializer(InventorySerializer):
    """A network interface of a node, with the GPUs that share its PCIe switch."""

    node = BriefRelatedField(**NODE_REF)
    pfc_priorities = serializers.ListField(
        child=serializers.IntegerField(min_value=0, max_value=7), required=False, max_length=8
    )
    peer_gpus = BriefRelatedField(
        queryset=Gpu.objects.select_related("node"), natural_key=("node__hostname", "index"), many=True, required=False
    )

    class Meta:
        model = Nic
        fields = [
            *COMMON,
            "node",
            "name",
            "mac",
            "purpose",
            "speed_gbps",
            "mtu",
            "rdma_capable",
            "transport",
            "plane",
            "pfc_priorities",
            "ecn_enabled",
            "numa_node",
            "pci_address",
            "pcie_switch",
            "link_up",
            "peer_gpus",
            *TIMESTAMPS,
        ]

    def validate(self, attrs):
        attrs = super().validate(attrs)
        node_id = attrs["node"].pk if "node" in attrs else self.instance.node_id
        strangers = [gpu for gpu in attrs.get("peer_gpus", []) if gpu.node_id != node_id]
        if strangers:
            raise serializers.ValidationError({"peer_gpus": f"{strangers[0]} is in another node."})
        return attrs


class SwitchSerializer(InventorySerializer):
    """A switch of the fabric: a leaf or spine of plane A or B, or a management switch."""

    site = BriefRelatedField(queryset=Site.objects.all(), natural_key="slug")
    rack = BriefRelatedField(queryset=Rack.objects.all(), natural_key="name", required=False, allow_null=True)

    class Meta:
        model = Switch
        fields = [
            *COMMON,
            "name",
            "site",
            "rack",
            "plane",
            "tier",
            "model",
            "port_count",
            "port_speed_gbps",
            "management_ip",
            "position",
            "u_height",
            "face",
            *TIMESTAMPS,
        ]


class PduSerializer(InventorySerializer):
    """A rack's PDU on feed A or B: vertical (0U) on a side of the rear, or in U slots of a face."""

    rack = BriefRelatedField(queryset=Rack.objects.all(), natural_key="name")
    capacity_w = serializers.IntegerField(
        read_only=True, help_text="The maximum power, or the rated amps times volts where no maximum is given."
    )

    class Meta:
        model = Pdu
        fields = [
            *COMMON,
            "name",
            "rack",
            "model",
            "feed",
            "max_power_w",
            "rated_amps",
            "rated_volts",
            "capacity_w",
            "outlet_count",
            "position",
            "u_height",
            "face",
            "side",
            *TIMESTAMPS,
        ]


NIC_REF = {
    "queryset": Nic.objects.select_related("node"),
    "natural_key": ("node__hostname", "name"),
    "required": False,
    "allow_null": True,
}
SWITCH_REF = {"queryset": Switch.objects.all(), "natural_key": "name", "required": False, "allow_null": True}


class CableSerializer(InventorySerializer):
    """A link between two ports; each end is a node's NIC or a named switch port."""

    a_nic = BriefRelatedField(**NIC_REF)
    a_switch = BriefRelatedField(**SWITCH_REF)
    b_nic = BriefRelatedField(**NIC_REF)
    b_switch = BriefRelatedField(**SWITCH_REF)

    class Meta:
        model = Cable
        fields = [
            *COMMON,
            "a_nic",
            "a_switch",
            "a_port",
            "b_nic",
            "b_switch",
            "b_port",
            "speed_gbps",
            "medium",
            "plane",
            "label",
            *TIMESTAMPS,
        ]


class StorageTierSerializer(InventorySerializer):
    """A class of storage, with the bandwidth it delivers and the bandwidth it must deliver."""

    site = BriefRelatedField(queryset=Site.objects.all(), natural_key="slug")
    meets_requirement = serializers.BooleanField(read_only=True)

    class Meta:
        model = StorageTier
        fields = [
            *COMMON,
            "site",
            "name",
            "kind",
            "medium",
            "bandwidth_gb_per_s",
            "required_bandwidth_gb_per_s",
            "meets_requirement",
            "capacity_tb",
            *TIMESTAMPS,
        ]


class VolumeSerializer(InventorySerializer):
    """Storage of a tier mounted on a node."""

    node = BriefRelatedField(**NODE_REF)
    tier = BriefRelatedField(queryset=StorageTier.objects.all(), natural_key="name")

    class Meta:
        model = Volume
        fields = [*COMMON, "node", "tier", "mount_point", "capacity_gb", *TIMESTAMPS]


class FirmwareSerializer(InventorySerializer):
    """The version of one firmware component of a node."""

    node = BriefRelatedField(**NODE_REF)

    class Meta:
        model = Firmware
        fields = [*COMMON, "node", "component", "target", "version", *TIMESTAMPS]


# A key type the model takes, then its blob in padded base64 (what fingerprint_of decodes), then an optional comment
# (which the model drops; no NUL, which no text field takes).
OPENSSH_PUBLIC_KEY = RegexValidator(
    r"^(?:ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(?:256|384|521)) "
    r"(?:[A-Za-z0-9+/]{4})+(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?(?: [^\n\x00]*)?$",
    "Enter an OpenSSH public key such as 'ssh-ed25519 AAAA…'.",
)


class SshHostKeySerializer(InventorySerializer):
    """A node's SSH host key; connections verify against trusted keys only."""

    node = BriefRelatedField(**NODE_REF)
    approved_by = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True, help_text="Null until an admin trusts or refuses it."
    )

    class Meta:
        model = SshHostKey
        fields = [*COMMON, "node", "key_type", "public_key", "fingerprint", "state", "approved_by", *TIMESTAMPS]
        read_only_fields = ["key_type", "fingerprint"]
        extra_kwargs = {"public_key": {"validators": [OPENSSH_PUBLIC_KEY]}}

    def validate_public_key(self, value: str) -> str:
        try:
            fingerprint_of(value)
        except ValueError:
            raise serializers.ValidationError("Enter an OpenSSH public key such as 'ssh-ed25519 AAAA…'.") from None
        return value

    def validate(self, attrs):
        attrs = super().validate(attrs)
        if "public_key" in attrs:
            # The model's clean() normalises the key and derives the fingerprint, but on a copy: keep both here.
            attrs["public_key"] = " ".join(attrs["public_key"].split()[:2])
            attrs["fingerprint"] = fingerprint_of(attrs["public_key"])
        return attrs


# A node in detail: what it holds, each part without the node it belongs to.


class NodeGpuSerializer(GpuSerializer):
    class Meta(GpuSerializer.Meta):
        fields = [f for f in GpuSerializer.Meta.fields if f not in {"node", *TIMESTAMPS}]


class NodeNicSerializer(NicSerializer):
    class Meta(NicSerializer.Meta):
        fields = [f for f in NicSerializer.Meta.fields if f not in {"node", "peer_gpus", *TIMESTAMPS}]


class NodeFirmwareSerializer(FirmwareSerializer):
    class Meta(FirmwareSerializer.Meta):
        fields = ["id", "component", "target", "version"]


class NodeVolumeSerializer(VolumeSerializer):
    class Meta(VolumeSerializer.Meta):
        fields = ["id", "tier", "mount_point", "capacity_gb"]


class NodeLinkSerializer(serializers.Serializer):
    """One cabled NIC of a node and what is at the far end of its cable."""

    nic = serializers.CharField(source="name")
    plane = serializers.CharField()
    nic_speed_gbps = serializers.IntegerField(source="speed_gbps")
    link_up = serializers.BooleanField()
    cable = serializers.SerializerMethodField()
    cable_speed_gbps = serializers.SerializerMethodField()
    peer = serializers.SerializerMethodField()

    @staticmethod
    def _cable(nic: Nic) -> tuple[Cable, str]:
        cable = getattr(nic, "cable_as_a", None)
        return (cable, "b") if cable is not None else (nic.cable_as_b, "a")

    @extend_schema_field(BriefSerializer)
    def get_cable(self, nic: Nic) -> dict:
        return brief(self._cable(nic)[0], self.context.get("request"))

    def get_cable_speed_gbps(self, nic: Nic) -> int:
        return self._cable(nic)[0].speed_gbps

    def get_peer(self, nic: Nic) -> str:
        cable, far = self._cable(nic)
        return cable.a_end_label if far == "a" else cable.b_end_label


def is_cabled(nic: Nic) -> bool:
    return getattr(nic, "cable_as_a", None) is not None or getattr(nic, "cable_as_b", None) is not None


class NodeDetailSerializer(NodeSerializer):
    """A server with its GPUs, NICs, cabled links, firmware and volumes."""

    gpus = NodeGpuSerializer(many=True, read_only=True)
    nics = NodeNicSerializer(many=True, read_only=True)
    firmware = NodeFirmwareSerializer(many=True, read_only=True)
    volumes = NodeVolumeSerializer(many=True, read_only=True)
    links = serializers.SerializerMethodField()

    class Meta(NodeSerializer.Meta):
        fields = [*NodeSerializer.Meta.fields, "gpus", "nics", "links", "firmware", "volumes"]

    @extend_schema_field(NodeLinkSerializer(many=True))
    def get_links(self, node: Node) -> list:
        cabled = [nic for nic in node.nics.all() if is_cabled(nic)]
        return NodeLinkSerializer(cabled, many=True, context=self.context).data


class DrainSerializer(serializers.Serializer):
    """POST /api/nodes/{id}/drain/: why, and optionally since and until when."""

    reason = serializers.CharField(max_length=200)
    since = serializers.DateTimeField(required=False, allow_null=True)
    until = serializers.DateTimeField(required=False, allow_null=True)


class FarEndSerializer(serializers.Serializer):
    """The other end of a cable: a node's NIC (node, nic) or another switch's port (switch, port)."""

    label = serializers.CharField()
    node = serializers.SerializerMethodField()
    nic = serializers.SerializerMethodField()
    switch = serializers.SerializerMethodField()
    port = serializers.CharField(allow_blank=True)
    up = serializers.BooleanField()

    def get_node(self, far) -> str | None:
        return far.node.hostname if far.node is not None else None

    def get_nic(self, far) -> str | None:
        return far.nic.name if far.nic is not None else None

    def get_switch(self, far) -> str | None:
        return far.switch.name if far.switch is not None else None


class PortRowSerializer(serializers.Serializer):
    port = serializers.CharField()
    cable = serializers.UUIDField(source="cable.public_id")
    speed_gbps = serializers.IntegerField()
    medium = serializers.CharField(source="cable.medium")
    plane = serializers.CharField(source="cable.plane", allow_blank=True)
    label = serializers.CharField(source="cable.label", allow_blank=True)
    far = FarEndSerializer()


class SwitchPortsSerializer(serializers.Serializer):
    """GET /api/switches/{id}/ports/: each cabled port and its far end; free counts the numbered ports left."""

    switch = serializers.CharField(source="switch.name")
    used = serializers.IntegerField()
    free = serializers.IntegerField()
    down = serializers.IntegerField()
    rows = PortRowSerializer(many=True)


class UplinksSerializer(serializers.Serializer):
    to = serializers.CharField(source="to.name")
    tier = serializers.CharField(source="to.tier")
    count = serializers.IntegerField()
    gbps = serializers.IntegerField()
    ports = serializers.SerializerMethodField()

    def get_ports(self, group) -> list[str]:
        return [f"{row.port}→{row.far.port}" for row in group.cables]


class TraceSerializer(serializers.Serializer):
    """GET /api/nics/{id}/trace/: GPU → NIC → cable → first switch and port → that switch's uplinks."""

    node = serializers.CharField(source="nic.node.hostname")
    nic = serializers.CharField(source="nic.name")
    link_up = serializers.BooleanField(source="nic.link_up")
    gpus = serializers.SerializerMethodField()
    cable = serializers.SerializerMethodField()
    switch = serializers.SerializerMethodField()
    port = serializers.CharField(source="first_port", allow_blank=True)
    uplinks = UplinksSerializer(many=True)
    problems = serializers.ListField(child=serializers.CharField())

    def get_gpus(self, trace) -> list[int]:
        return [gpu.index for gpu in trace.gpus]

    def get_cable(self, trace) -> str | None:
        return str(trace.cable.public_id) if trace.cable is not None else None

    def get_switch(self, trace) -> str | None:
        return trace.first_switch.name if trace.first_switch is not None else None
