"""Rack-scale systems (GB200 NVL72 and kin): an NVLink domain spanning a rack, its NVLink switch trays, power shelves,
the liquid-cooling loop with its leak sensors, and the IMEX domains and NVLink partitions carved out of it.

A compute tray is a Node (a host with its GPUs and Grace CPUs) that names its domain and its slot; what a system of
a kind holds (trays, links per GPU) is catalogue data (apps/inventory/catalogue.RACK_SYSTEMS). Whether a domain is
whole (every tray and switch tray there) is checked across rows (apps/inventory/rackscale.py), since no one row can
know it.
"""

import uuid

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from apps.core.audit import AuditedModel
from apps.core.models import PublicModel
from apps.core.validators import host_validator, name_validator
from apps.inventory.catalogue import RACK_SYSTEMS
from apps.inventory.choices import CoolantLoopKind
from apps.inventory.models.mounting import Mounted, check_mounting, mounted_besides_nodes, mounted_nodes
from apps.inventory.models.nodes import Node
from apps.inventory.models.sites import Rack

SYSTEM_CHOICES = [(name, name) for name in RACK_SYSTEMS]


class NvlinkDomain(AuditedModel, PublicModel):
    """One rack's NVLink domain: its compute trays are the nodes that name it; its switch trays are below."""

    name = models.CharField(max_length=64, unique=True, validators=[name_validator])
    rack = models.OneToOneField(Rack, on_delete=models.PROTECT, related_name="nvlink_domain")
    system = models.CharField(max_length=32, choices=SYSTEM_CHOICES)
    cluster_uuid = models.UUIDField(
        default=uuid.uuid4, unique=True, help_text="The fabric's cluster UUID, as `nvidia-smi -q` prints it."
    )

    class Meta:
        ordering = ["name"]
        verbose_name = "NVLink domain"

    def __str__(self) -> str:
        return self.name

    @property
    def spec(self):
        return RACK_SYSTEMS[self.system]


class _TrayMounted(models.Model):
    """A U-mounted tray of a rack-scale rack (switch tray, power shelf): full depth, like a node."""

    position = models.PositiveSmallIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    u_height = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1), MaxValueValidator(4)])

    class Meta:
        abstract = True

    def rack_of(self) -> Rack | None:
        return None  # each tray says which rack it is mounted in

    def clean(self) -> None:
        super().clean()
        rack = self.rack_of()
        if rack is None or self.position is None:
            return
        others = mounted_nodes(rack.pk) + mounted_besides_nodes(rack.pk, exclude=self)
        check_mounting(rack, Mounted(self.name, self.position, self.u_height), others, field="position")


class NvlinkSwitchTray(_TrayMounted, AuditedModel, PublicModel):
    """An NVLink switch tray (two NVSwitch chips on NVL72): every GPU of the domain has links to each one."""

    name = models.CharField(max_length=64, unique=True, validators=[name_validator])
    domain = models.ForeignKey(NvlinkDomain, on_delete=models.CASCADE, related_name="switch_trays")
    slot = models.PositiveSmallIntegerField(validators=[MinValueValidator(1)])
    serial = models.CharField(max_length=64, blank=True)
    bmc_address = models.CharField(
        max_length=253,
        blank=True,
        validators=[host_validator],
        help_text="Its BMC's Redfish endpoint (leak detectors, temperatures); empty: not read.",
    )

    class Meta:
        ordering = ["domain__name", "slot"]
        verbose_name = "NVLink switch tray"
        constraints = [
            models.UniqueConstraint(
                fields=["domain", "slot"],
                name="switch_tray_unique_slot",
                violation_error_message="Another switch tray already has this slot in the domain.",
            )
        ]

    def __str__(self) -> str:
        return self.name

    def rack_of(self) -> Rack | None:
        return self.domain.rack if self.domain_id else None

    def clean(self) -> None:
        if self.domain_id and self.slot and self.slot > self.domain.spec.switch_trays:
            spec = self.domain.spec
            raise ValidationError({"slot": f"A {spec.name} has switch trays 1–{spec.switch_trays}."})
        super().clean()


class PowerShelf(_TrayMounted, AuditedModel, PublicModel):
    """A rack's power shelf: its rectifiers feed the busbar the trays draw from."""

    name = models.CharField(max_length=64, unique=True, validators=[name_validator])
    rack = models.ForeignKey(Rack, on_delete=models.PROTECT, related_name="power_shelves")
    psu_count = models.PositiveSmallIntegerField(default=6, validators=[MinValueValidator(1), MaxValueValidator(12)])
    capacity_w = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    bmc_address = models.CharField(max_length=253, blank=True, help_text="Its Redfish endpoint, if it has one.")

    class Meta:
        ordering = ["rack__name", "name"]
        verbose_name_plural = "power shelves"

    def __str__(self) -> str:
        return self.name

    def rack_of(self) -> Rack | None:
        return self.rack if self.rack_id else None


class CoolantLoop(AuditedModel, PublicModel):
    """The liquid-cooling loop of a rack: its design flow and the limits its sensors are judged against."""

    name = models.CharField(max_length=64, unique=True, validators=[name_validator])
    rack = models.ForeignKey(Rack, on_delete=models.PROTECT, related_name="coolant_loops")
    kind = models.CharField(max_length=16, choices=CoolantLoopKind.choices, default=CoolantLoopKind.IN_ROW_CDU)
    design_flow_lpm = models.DecimalField(
        "design flow (l/min)", max_digits=6, decimal_places=1, validators=[MinValueValidator(1)]
    )
    max_supply_c = models.DecimalField("maximum supply temperature (°C)", max_digits=4, decimal_places=1)
    max_return_c = models.DecimalField("maximum return temperature (°C)", max_digits=4, decimal_places=1)
    max_pressure_kpa = models.PositiveIntegerField("maximum pressure (kPa)", validators=[MinValueValidator(1)])

    class Meta:
        ordering = ["rack__name", "name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        super().clean()
        if self.max_supply_c is not None and self.max_return_c is not None and self.max_return_c <= self.max_supply_c:
            raise ValidationError({"max_return_c": "The return limit must be above the supply limit."})


class LeakSensor(AuditedModel, PublicModel):
    """A leak sensor in one tray of a loop's rack: a compute tray (a node) or an NVLink switch tray."""

    name = models.CharField(max_length=64, unique=True, validators=[name_validator])
    loop = models.ForeignKey(CoolantLoop, on_delete=models.CASCADE, related_name="leak_sensors")
    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.CASCADE, related_name="leak_sensors")
    switch_tray = models.ForeignKey(
        NvlinkSwitchTray, null=True, blank=True, on_delete=models.CASCADE, related_name="leak_sensors"
    )

    class Meta:
        ordering = ["loop__name", "name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(node__isnull=False, switch_tray__isnull=True)
                | Q(node__isnull=True, switch_tray__isnull=False),
                name="leak_sensor_in_one_tray",
                violation_error_message="A leak sensor sits in one tray: a compute tray (node) or a switch tray.",
            )
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        super().clean()
        if not self.node_id and not self.switch_tray_id:
            raise ValidationError({"node": f"Leak sensor {self.name} names no tray: give its node or switch tray."})
        rack_id = self.loop.rack_id if self.loop_id else None
        tray_rack = self.node.rack_id if self.node_id else None
        if self.switch_tray_id:
            tray_rack = self.switch_tray.domain.rack_id
        if rack_id and tray_rack != rack_id:
            field = "node" if self.node_id else "switch_tray"
            raise ValidationError({field: f"Leak sensor {self.name}'s tray is not in loop {self.loop}'s rack."})


class ImexDomain(AuditedModel, PublicModel):
    """The nodes whose IMEX daemons share memory exports over NVLink: within one NVLink domain."""

    name = models.CharField(max_length=64, unique=True, validators=[name_validator])
    domain = models.ForeignKey(NvlinkDomain, on_delete=models.CASCADE, related_name="imex_domains")
    nodes = models.ManyToManyField(Node, blank=True, related_name="imex_domains")

    class Meta:
        ordering = ["name"]
        verbose_name = "IMEX domain"

    def __str__(self) -> str:
        return self.name


class NvlinkPartition(AuditedModel, PublicModel):
    """An NVLink partition of a domain (as NMX/the fabric manager define it): the trays whose GPUs may reach one
    another; a partition never spans domains."""

    name = models.CharField(max_length=64, unique=True, validators=[name_validator])
    domain = models.ForeignKey(NvlinkDomain, on_delete=models.CASCADE, related_name="partitions")
    partition_id = models.PositiveIntegerField(validators=[MaxValueValidator(0x7FFF)])
    nodes = models.ManyToManyField(Node, blank=True, related_name="nvlink_partitions")

    class Meta:
        ordering = ["domain__name", "partition_id"]
        verbose_name = "NVLink partition"
        constraints = [
            models.UniqueConstraint(
                fields=["domain", "partition_id"],
                name="partition_unique_id",
                violation_error_message="Another partition of the domain has this id.",
            )
        ]

    def __str__(self) -> str:
        return self.name


__all__ = [
    "CoolantLoop",
    "ImexDomain",
    "LeakSensor",
    "NvlinkDomain",
    "NvlinkPartition",
    "NvlinkSwitchTray",
    "PowerShelf",
]
