"""Inventory viewsets. Reading needs a viewer, changing needs an admin (RolePermission, set globally)."""

from collections import Counter

from django.apps import apps as django_apps
from django.db import IntegrityError, transaction
from django.db.models import Prefetch, ProtectedError
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.response import Response

from apps.accounts.choices import Role
from apps.accounts.permissions import HostKeyPermission
from apps.core.filters import KnownQueryParameters, ListOrderingFilter
from apps.inventory import fabric, filters, power, services
from apps.inventory.api import serializers
from apps.inventory.choices import HostKeyState
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

UUID_PATTERN = "[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}"


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "Still in use."
    default_code = "conflict"


def stable(queryset):
    return queryset.order_by(*queryset.model._meta.ordering, "pk")


class InventoryViewSet(viewsets.ModelViewSet):
    """Addressed by public id; saving is atomic; deleting what other objects still use is a 409, not a 500."""

    lookup_field = "public_id"
    lookup_value_regex = UUID_PATTERN
    filter_backends = [KnownQueryParameters, DjangoFilterBackend, ListOrderingFilter]
    ordering_fields = "__all__"

    @transaction.atomic
    def perform_create(self, serializer):
        serializer.save()

    @transaction.atomic
    def perform_update(self, serializer):
        serializer.save()

    def perform_destroy(self, instance):
        try:
            with transaction.atomic():  # a constraint the delete breaks rolls back to here, not the request
                instance.delete()
        except ProtectedError as error:
            users = Counter(obj._meta.verbose_name_plural for obj in error.protected_objects)
            listed = ", ".join(f"{count} {name}" for name, count in sorted(users.items()))
            raise Conflict(f"{instance} is still used by {listed}; move or delete those first.") from None
        except IntegrityError as error:
            # SET_NULL left a row breaking its own check (an incident whose only subject was this training job).
            raise Conflict(f"{instance} is still needed by {_constraint_owner(error)}; delete those first.") from None


def _constraint_owner(error: IntegrityError) -> str:
    """The rows whose constraint the delete broke, by the constraint's name (PostgreSQL reports it)."""
    name = getattr(getattr(error.__cause__, "diag", None), "constraint_name", None) or ""
    for model in django_apps.get_models():
        if any(constraint.name == name for constraint in model._meta.constraints):
            return f"{model._meta.verbose_name_plural} that refer to it ({name})"
    return "rows that refer to it"


class SiteViewSet(InventoryViewSet):
    queryset = stable(Site.objects.all())
    serializer_class = serializers.SiteSerializer
    filterset_class = filters.SiteFilterSet


class RackViewSet(InventoryViewSet):
    # Annotated with the full-load estimate (orderable: `ordering=full_load_w`); the measured draw is read for the
    # page's racks at once (power.attach_power), and for a rack as it is read or saved.
    queryset = stable(power.with_power(Rack.objects.select_related("site")))
    serializer_class = serializers.RackSerializer
    filterset_class = filters.RackFilterSet

    def paginate_queryset(self, queryset):
        return power.attach_power(super().paginate_queryset(queryset))

    def get_object(self):
        return power.attach_power([super().get_object()])[0]

    def perform_create(self, serializer):
        super().perform_create(serializer)
        power.attach_power([serializer.instance])

    def perform_update(self, serializer):
        super().perform_update(serializer)
        power.attach_power([serializer.instance])


class TagViewSet(InventoryViewSet):
    queryset = stable(Tag.objects.all())
    serializer_class = serializers.TagSerializer
    filterset_class = filters.TagFilterSet


class GpuSkuViewSet(InventoryViewSet):
    queryset = stable(GpuSku.objects.all())
    serializer_class = serializers.GpuSkuSerializer
    filterset_class = filters.GpuSkuFilterSet


# What a node's references do not show (their brief needs the public id and the name): a page of 100 nodes would
# load and convert some 2,000 values for nothing. Should __str__ need more, the pinned query counts will say so.
BRIEF_UNUSED = [
    f"{path}__{field.name}"
    for path, model in (("rack", Rack), ("rack__site", Site), ("gpu_sku", GpuSku))
    for field in model._meta.concrete_fields
    if field.name not in {"id", "public_id", "name", "site"}
]


class NodeViewSet(InventoryViewSet):
    # The list costs the same queries for any page: references joined, tags prefetched, counts for the page alone.
    queryset = stable(
        Node.objects.select_related("rack__site", "gpu_sku")
        .defer(*BRIEF_UNUSED)
        .prefetch_related(Prefetch("tags", queryset=Tag.objects.only("public_id", "name")))
    )
    filterset_class = filters.NodeFilterSet

    def paginate_queryset(self, queryset):
        # Counting in the page query would count for every row skipped by OFFSET too (PostgreSQL evaluates the
        # subqueries before LIMIT applies): ~4x slower at offset 9000 of 10,000 nodes, and JIT compiles it.
        page = super().paginate_queryset(queryset)
        counts = Node.objects.filter(pk__in=[node.pk for node in page]).with_counts()
        by_id = {row[0]: row[1:] for row in counts.order_by().values_list("pk", "gpu_count", "nic_count")}
        for node in page:
            node.gpu_count, node.nic_count = by_id[node.pk]
        return page

    def get_queryset(self):
        queryset = super().get_queryset()
        if self.action == "list":
            return queryset
        queryset = queryset.with_counts()
        if self.action != "retrieve":
            return queryset
        cabled_nics = Nic.objects.select_related(
            "cable_as_a__b_switch", "cable_as_a__b_nic__node", "cable_as_b__a_switch", "cable_as_b__a_nic__node"
        )
        return queryset.prefetch_related(
            Prefetch("gpus", queryset=Gpu.objects.select_related("sku").order_by("index")),
            Prefetch("nics", queryset=cabled_nics.order_by("name")),
            Prefetch("firmware", queryset=Firmware.objects.order_by("component", "target")),
            Prefetch("volumes", queryset=Volume.objects.select_related("tier").order_by("mount_point")),
        )

    def get_serializer_class(self):
        if self.action == "retrieve":
            return serializers.NodeDetailSerializer
        if self.action == "drain":
            return serializers.DrainSerializer
        return serializers.NodeSerializer

    @property
    def write_role(self) -> str:
        # Draining is an operator's call (like starting a job); editing the node itself stays an admin's.
        return Role.OPERATOR if self.action in {"drain", "undrain"} else Role.ADMIN

    @extend_schema(request=serializers.DrainSerializer, responses=serializers.NodeSerializer)
    @action(detail=True, methods=["post"])
    def drain(self, request, public_id=None):
        node = self.get_object()
        given = serializers.DrainSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        try:
            services.drain_nodes(nodes=[node], reason=data["reason"], since=data.get("since"), until=data.get("until"))
        except services.NodeChangeRefused as refused:
            raise ValidationError(refused.errors) from None
        return Response(serializers.NodeSerializer(node, context=self.get_serializer_context()).data)

    @extend_schema(request=None, responses=serializers.NodeSerializer)
    @action(detail=True, methods=["post"])
    def undrain(self, request, public_id=None):
        node = self.get_object()
        try:
            services.undrain_nodes(nodes=[node])
        except services.NodeChangeRefused as refused:
            raise ValidationError(refused.errors) from None
        return Response(serializers.NodeSerializer(node, context=self.get_serializer_context()).data)


class GpuViewSet(InventoryViewSet):
    queryset = stable(Gpu.objects.select_related("node", "sku"))
    serializer_class = serializers.GpuSerializer
    filterset_class = filters.GpuFilterSet


class NicViewSet(InventoryViewSet):
    queryset = stable(
        Nic.objects.select_related("node").prefetch_related(
            Prefetch("peer_gpus", queryset=Gpu.objects.select_related("node"))
        )
    )
    serializer_class = serializers.NicSerializer
    filterset_class = filters.NicFilterSet

    @extend_schema(responses=serializers.TraceSerializer)
    @action(detail=True, methods=["get"])
    def trace(self, request, public_id=None):
        return Response(serializers.TraceSerializer(fabric.trace_nic(self.get_object())).data)


class SwitchViewSet(InventoryViewSet):
    queryset = stable(Switch.objects.select_related("site", "rack"))
    serializer_class = serializers.SwitchSerializer
    filterset_class = filters.SwitchFilterSet

    @extend_schema(responses=serializers.SwitchPortsSerializer)
    @action(detail=True, methods=["get"])
    def ports(self, request, public_id=None):
        return Response(serializers.SwitchPortsSerializer(fabric.switch_ports(self.get_object())).data)


class PduViewSet(InventoryViewSet):
    queryset = stable(Pdu.objects.select_related("rack"))
    serializer_class = serializers.PduSerializer
    filterset_class = filters.PduFilterSet


class CableViewSet(InventoryViewSet):
    queryset = stable(Cable.objects.select_related("a_nic__node", "b_nic__node", "a_switch", "b_switch"))
    serializer_class = serializers.CableSerializer
    filterset_class = filters.CableFilterSet


class StorageTierViewSet(InventoryViewSet):
    queryset = stable(StorageTier.objects.select_related("site"))
    serializer_class = serializers.StorageTierSerializer
    filterset_class = filters.StorageTierFilterSet


class VolumeViewSet(InventoryViewSet):
    queryset = stable(Volume.objects.select_related("node", "tier"))
    serializer_class = serializers.VolumeSerializer
    filterset_class = filters.VolumeFilterSet


class FirmwareViewSet(InventoryViewSet):
    queryset = stable(Firmware.objects.select_related("node"))
    serializer_class = serializers.FirmwareSerializer
    filterset_class = filters.FirmwareFilterSet


class SshHostKeyViewSet(InventoryViewSet):
    permission_classes = [HostKeyPermission]  # the node page's "trust" button follows the same rule
    queryset = stable(SshHostKey.objects.select_related("node", "approved_by"))
    serializer_class = serializers.SshHostKeySerializer
    filterset_class = filters.SshHostKeyFilterSet

    @transaction.atomic
    def perform_create(self, serializer):
        # Who trusted a key is part of its record.
        trusting = serializer.validated_data.get("state") == HostKeyState.TRUSTED
        was_trusted = serializer.instance is not None and serializer.instance.state == HostKeyState.TRUSTED
        serializer.save(**({"approved_by": self.request.user} if trusting and not was_trusted else {}))

    perform_update = perform_create
