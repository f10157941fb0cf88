"""Filters of the inventory's lists, shared by the API and the UI's list views.

A reference filter (`?rack=`, `?node=`, ...) takes a public id or the object's natural key (a node's hostname, a
site's slug); one that matches nothing is an error naming the filter, not an empty page, so a typo is noticed.
"""

import uuid

import django_filters
from django import forms
from django.db.models import Exists, OuterRef, Q

from apps.core.filters import FilterSet
from apps.core.listing import Column
from apps.core.text import echo
from apps.inventory.choices import GpuHealth, GpuPresence, HealthState, NodeRole, NodeStatus, PowerState
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

UNHEALTHY_GPU = [GpuHealth.WARNING, GpuHealth.FAILED, GpuHealth.MISSING]


class RefField(forms.CharField):
    """Turns a public id or natural key into the primary keys of the objects it names."""

    def __init__(self, *, queryset, natural_key: str, **kwargs):
        self.queryset, self.natural_key = queryset, natural_key
        super().__init__(**kwargs)

    def clean(self, value):
        value = super().clean(value)
        if not value:
            return None
        try:
            lookup = {"public_id": uuid.UUID(value)}
        except ValueError:
            lookup = {self.natural_key: value}
        ids = list(self.queryset.filter(**lookup).values_list("pk", flat=True))
        if not ids:
            name = self.queryset.model._meta.verbose_name
            # The value goes in as a parameter, never into the message itself: django-filter renders the message
            # with `message % params`, so a `%` typed by the user would be read as a format directive.
            raise forms.ValidationError(
                "No %(name)s matches %(value)s.", code="invalid_choice", params={"name": name, "value": echo(value)}
            )
        return ids


class RefFilter(django_filters.CharFilter):
    """Filters on a relation named by public id or natural key (several rows may share a name, e.g. racks)."""

    field_class = RefField

    def filter(self, qs, value):
        if not value:
            return qs
        return qs.filter(**{f"{self.field_name}__in": value})


class StrictBooleanField(forms.NullBooleanField):
    """A yes/no filter that refuses anything else, where Django's would silently ignore it."""

    # A plain select hands over the raw text; Django's NullBooleanSelect maps unknown values to "unset".
    widget = forms.Select(choices=[("", "Any"), ("true", "Yes"), ("false", "No")])

    def to_python(self, value):
        if value in (None, ""):
            return None
        if str(value).lower() in {"true", "1", "yes"}:
            return True
        if str(value).lower() in {"false", "0", "no"}:
            return False
        raise forms.ValidationError("Give true or false.", code="invalid")

    def validate(self, value):
        pass


class StrictBooleanFilter(django_filters.BooleanFilter):
    field_class = StrictBooleanField


def node_ref(field_name: str = "node") -> RefFilter:
    return RefFilter(
        field_name=field_name, queryset=Node.objects.all(), natural_key="hostname", label="Node hostname or public id"
    )


def site_ref(field_name: str = "site") -> RefFilter:
    return RefFilter(
        field_name=field_name, queryset=Site.objects.all(), natural_key="slug", label="Site slug or public id"
    )


def sku_ref(field_name: str) -> RefFilter:
    return RefFilter(
        field_name=field_name, queryset=GpuSku.objects.all(), natural_key="name", label="GPU SKU name or public id"
    )


class NodeFilterSet(FilterSet):
    q = django_filters.CharFilter(method="search", label="Search")
    hostname = django_filters.CharFilter(label="Host name (exact)")
    # distinct=False: one column of the node itself cannot duplicate rows, and DISTINCT over the page costs.
    role = django_filters.MultipleChoiceFilter(choices=NodeRole.choices, distinct=False)
    status = django_filters.MultipleChoiceFilter(choices=NodeStatus.choices, distinct=False)
    # What the node's open health events say, as apps/health stored it on the node (no events read per row).
    health_state = django_filters.MultipleChoiceFilter(choices=HealthState.choices, distinct=False, label="Health")
    # The chassis power its BMC last read, as apps/monitoring stored it on the node (a node never read matches neither).
    power_state = django_filters.MultipleChoiceFilter(choices=PowerState.choices, distinct=False, label="Power")
    site = site_ref("rack__site")
    rack = RefFilter(queryset=Rack.objects.all(), natural_key="name", label="Rack name or public id")
    tag = RefFilter(field_name="tags", queryset=Tag.objects.all(), natural_key="slug", label="Tag slug or public id")
    gpu_sku = sku_ref("gpu_sku")
    has_unhealthy_gpu = StrictBooleanFilter(method="filter_unhealthy", label="Has an unhealthy GPU")

    class Meta:
        model = Node
        fields = [
            "q",
            "hostname",
            "role",
            "status",
            "health_state",
            "power_state",
            "site",
            "rack",
            "tag",
            "gpu_sku",
            "has_unhealthy_gpu",
        ]

    def search(self, queryset, name, value: str):
        value = value.strip()
        if not value:
            return queryset
        return queryset.filter(
            Q(hostname__icontains=value) | Q(management_ip__icontains=value) | Q(bmc_address__icontains=value)
        )

    def filter_unhealthy(self, queryset, name, value: bool):
        # A subquery, not a join: joining GPUs would multiply rows and the list's GPU counts.
        unhealthy = Exists(Gpu.objects.filter(node=OuterRef("pk"), health__in=UNHEALTHY_GPU))
        return queryset.filter(unhealthy if value else ~unhealthy)


# The node list's columns: what its page sorts by and its CSV export writes (GET /api/nodes/ orders by the same fields).
NODE_COLUMNS = (
    Column("hostname", "Host name", lambda node: node.hostname),
    Column("role", "Role", lambda node: node.get_role_display()),
    Column("status", "Status", lambda node: node.get_status_display() + (" (drained)" if node.is_drained else "")),
    Column("health_state", "Health", lambda node: node.get_health_state_display()),
    Column("rack", "Rack", lambda node: node.rack.name if node.rack else "", order="rack__name"),
    Column("position", "Position", lambda node: node.rack_units, order="u_position"),
    Column("gpus", "GPUs", lambda node: node.gpu_count, order="gpu_count"),
    Column("gpu_sku", "GPU SKU", lambda node: node.gpu_sku.name if node.gpu_sku else "", order="gpu_sku__name"),
    Column("nics", "NICs", lambda node: node.nic_count, order="nic_count"),
    Column("management_ip", "Management IP", lambda node: node.management_ip or ""),
    Column("tags", "Tags", lambda node: " ".join(tag.slug for tag in node.tags.all()), order=None),
)


# The racks list's columns (racks annotated by power.with_power and power.with_measured, then power.attach_power):
# the measured draw sorts on the annotation monitoring provides, the cells show attach_power's figures.
RACK_COLUMNS = (
    Column("name", "Rack", lambda rack: rack.name),
    Column("site", "Site", lambda rack: rack.site.name, order="site__name"),
    Column("row", "Row", lambda rack: rack.row),
    Column("position", "Position", lambda rack: rack.position),
    Column("u_height", "Height (U)", lambda rack: rack.u_height),
    Column("nodes", "Nodes", lambda rack: rack.node_count, order="node_count"),
    Column("budget_kw", "Budget (kW)", lambda rack: rack.power_budget_kw, order="power_budget_kw"),
    Column("full_load_kw", "Full load (kW)", lambda rack: rack.power.full_load_kw, order="full_load_w"),
    Column(
        "measured_kw",
        "Measured (kW)",
        lambda rack: "" if rack.power.measured is None else rack.power.measured_kw,
        order="measured_w",
    ),
)

PDU_COLUMNS = (
    Column("name", "Name", lambda pdu: pdu.name),
    Column("rack", "Rack", lambda pdu: pdu.rack.name, order="rack__name"),
    Column("feed", "Feed", lambda pdu: pdu.feed),
    Column("model", "Model", lambda pdu: pdu.model),
    Column("capacity_w", "Capacity (W)", lambda pdu: pdu.capacity_w, order=None),
    Column("outlet_count", "Outlets", lambda pdu: pdu.outlet_count),
    Column("mounting", "Mounting", lambda pdu: pdu.mounting, order="position"),
)

SWITCH_COLUMNS = (
    Column("name", "Name", lambda switch: switch.name),
    Column("tier", "Tier", lambda switch: switch.get_tier_display()),
    Column("plane", "Plane", lambda switch: switch.plane),
    Column("rack", "Rack", lambda switch: switch.rack.name if switch.rack else "", order="rack__name"),
    Column("model", "Model", lambda switch: switch.model),
    Column("cabled", "Ports cabled", lambda switch: f"{switch.cabled} of {switch.port_count}"),
    Column("port_speed_gbps", "Port speed (Gb/s)", lambda switch: switch.port_speed_gbps),
)


class SiteFilterSet(FilterSet):
    class Meta:
        model = Site
        fields = ["name", "slug"]


class TagFilterSet(FilterSet):
    class Meta:
        model = Tag
        fields = ["name", "slug"]


class GpuSkuFilterSet(FilterSet):
    class Meta:
        model = GpuSku
        fields = ["name", "vendor", "architecture"]


class RackFilterSet(FilterSet):
    site = site_ref()

    class Meta:
        model = Rack
        fields = ["name", "site", "row"]


class GpuFilterSet(FilterSet):
    node = node_ref()
    sku = sku_ref("sku")
    health = django_filters.MultipleChoiceFilter(choices=GpuHealth.choices, distinct=False)
    presence = django_filters.MultipleChoiceFilter(choices=GpuPresence.choices, distinct=False)

    class Meta:
        model = Gpu
        fields = ["node", "sku", "health", "presence"]


class NicFilterSet(FilterSet):
    node = node_ref()
    link_up = StrictBooleanFilter()

    class Meta:
        model = Nic
        fields = ["node", "name", "purpose", "plane", "mtu", "transport", "link_up"]


class SwitchFilterSet(FilterSet):
    site = site_ref()

    class Meta:
        model = Switch
        fields = ["name", "site", "plane", "tier"]


class PduFilterSet(FilterSet):
    site = site_ref("rack__site")
    rack = RefFilter(queryset=Rack.objects.all(), natural_key="name", label="Rack name or public id")
    zero_u = StrictBooleanFilter(field_name="position", lookup_expr="isnull", label="Vertical (0U)")

    class Meta:
        model = Pdu
        fields = ["name", "site", "rack", "feed", "zero_u"]


class CableFilterSet(FilterSet):
    switch = RefFilter(
        queryset=Switch.objects.all(),
        natural_key="name",
        method="filter_switch",
        label="Switch (name or public id) at either end",
    )
    node = RefFilter(
        queryset=Node.objects.all(),
        natural_key="hostname",
        method="filter_node",
        label="Node (hostname or public id) at either end",
    )

    class Meta:
        model = Cable
        fields = ["plane", "medium", "switch", "node"]

    def filter_switch(self, queryset, name, ids: list[int]):
        return queryset.filter(Q(a_switch__in=ids) | Q(b_switch__in=ids))

    def filter_node(self, queryset, name, ids: list[int]):
        return queryset.filter(Q(a_nic__node__in=ids) | Q(b_nic__node__in=ids))


class StorageTierFilterSet(FilterSet):
    site = site_ref()

    class Meta:
        model = StorageTier
        fields = ["name", "site", "kind"]


class VolumeFilterSet(FilterSet):
    node = node_ref()
    tier = RefFilter(queryset=StorageTier.objects.all(), natural_key="name", label="Storage tier name or public id")

    class Meta:
        model = Volume
        fields = ["node", "tier"]


class FirmwareFilterSet(FilterSet):
    node = node_ref()

    class Meta:
        model = Firmware
        fields = ["node", "component", "version", "target"]


class SshHostKeyFilterSet(FilterSet):
    node = node_ref()

    class Meta:
        model = SshHostKey
        fields = ["node", "state"]
