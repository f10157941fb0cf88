from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q

from apps.core.audit import AuditedModel
from apps.core.models import PublicModel
from apps.core.validators import name_validator
from apps.inventory.choices import CableMedium, Plane, RackFace, SwitchTier
from apps.inventory.models.mounting import Mounted, check_mounting, mounted_besides_nodes, mounted_nodes
from apps.inventory.models.mounting import rack_units as units_label
from apps.inventory.models.nodes import Nic
from apps.inventory.models.sites import Rack, Site

port_name_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9/_.:-]{0,31}\Z", "Enter a port name such as swp12 or Eth1/12."
)


class Switch(AuditedModel, PublicModel):
    """A switch of the fabric: a leaf or spine on plane A or B, or a management switch."""

    name = models.CharField(max_length=64, unique=True, validators=[name_validator])
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="switches")
    rack = models.ForeignKey(Rack, null=True, blank=True, on_delete=models.PROTECT, related_name="switches")
    plane = models.CharField(max_length=8, choices=Plane.choices)
    tier = models.CharField(max_length=16, choices=SwitchTier.choices)
    model = models.CharField(max_length=64, blank=True)
    port_count = models.PositiveSmallIntegerField(validators=[MinValueValidator(1)])
    port_speed_gbps = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    management_ip = models.GenericIPAddressField(null=True, blank=True, unique=True)
    position = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)], help_text="Lowest U the switch occupies."
    )
    u_height = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1), MaxValueValidator(16)])
    face = models.CharField(max_length=8, choices=RackFace.choices, default=RackFace.FRONT)

    class Meta:
        ordering = ["plane", "tier", "name"]
        verbose_name_plural = "switches"
        constraints = [
            models.CheckConstraint(condition=Q(port_speed_gbps__gt=0), name="switch_speed_positive"),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        super().clean()
        if self.position is not None:
            if self.rack_id is None:
                raise ValidationError({"position": "A rack position needs a rack."})
            others = mounted_nodes(self.rack_id) + mounted_besides_nodes(self.rack_id, exclude=self)
            check_mounting(
                self.rack, Mounted(self.name, self.position, self.u_height, self.face), others, field="position"
            )

    @property
    def rack_units(self) -> str:
        return units_label(self.position, self.u_height)


class Cable(AuditedModel, PublicModel):
    """A link between two ports. Each end is either a node's NIC or a named port on a switch."""

    a_nic = models.OneToOneField(Nic, null=True, blank=True, on_delete=models.CASCADE, related_name="cable_as_a")
    a_switch = models.ForeignKey(Switch, null=True, blank=True, on_delete=models.CASCADE, related_name="cables_as_a")
    a_port = models.CharField(max_length=32, blank=True, validators=[port_name_validator])
    b_nic = models.OneToOneField(Nic, null=True, blank=True, on_delete=models.CASCADE, related_name="cable_as_b")
    b_switch = models.ForeignKey(Switch, null=True, blank=True, on_delete=models.CASCADE, related_name="cables_as_b")
    b_port = models.CharField(max_length=32, blank=True, validators=[port_name_validator])
    speed_gbps = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    # What a sweep last measured where it is below plan (a link trained down); empty: as planned, or never measured
    # slow. The topology counts the link at the lower of the two (apps/benchmarks/health_events.py writes it).
    measured_gbps = models.PositiveIntegerField(
        null=True, blank=True, editable=False, help_text="The rate last measured below plan; empty: as planned."
    )
    medium = models.CharField(max_length=8, choices=CableMedium.choices, default=CableMedium.AOC)
    plane = models.CharField(max_length=8, choices=Plane.choices, blank=True)
    label = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["plane", "label", "id"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    Q(a_nic__isnull=False, a_switch__isnull=True) | Q(a_nic__isnull=True, a_switch__isnull=False)
                ),
                name="cable_a_end_is_nic_or_switch",
                violation_error_message="End A is either a NIC or a switch port.",
            ),
            models.CheckConstraint(
                condition=(
                    Q(b_nic__isnull=False, b_switch__isnull=True) | Q(b_nic__isnull=True, b_switch__isnull=False)
                ),
                name="cable_b_end_is_nic_or_switch",
                violation_error_message="End B is either a NIC or a switch port.",
            ),
            models.UniqueConstraint(
                fields=["a_switch", "a_port"],
                condition=Q(a_switch__isnull=False),
                name="cable_unique_a_switch_port",
                violation_error_message="This switch port already has a cable.",
            ),
            models.UniqueConstraint(
                fields=["b_switch", "b_port"],
                condition=Q(b_switch__isnull=False),
                name="cable_unique_b_switch_port",
                violation_error_message="This switch port already has a cable.",
            ),
            models.CheckConstraint(condition=Q(speed_gbps__gt=0), name="cable_speed_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.a_end_label} ↔ {self.b_end_label}"

    @property
    def a_end_label(self) -> str:
        return str(self.a_nic) if self.a_nic_id else f"{self.a_switch}:{self.a_port}"

    @property
    def b_end_label(self) -> str:
        return str(self.b_nic) if self.b_nic_id else f"{self.b_switch}:{self.b_port}"

    def clean(self) -> None:
        super().clean()
        errors = {}
        for side in ("a", "b"):
            nic_id, switch_id = getattr(self, f"{side}_nic_id"), getattr(self, f"{side}_switch_id")
            port = getattr(self, f"{side}_port")
            if bool(nic_id) == bool(switch_id):
                errors[f"{side}_nic"] = f"End {side.upper()} is either a NIC or a switch port, not both or neither."
            elif switch_id and not port:
                errors[f"{side}_port"] = "Name the switch port."
            elif nic_id and port:
                errors[f"{side}_port"] = "A NIC end has no switch port name."
        if errors:
            raise ValidationError(errors)
        self._check_ends_free()

    def _check_ends_free(self) -> None:
        """A port carries one cable, whichever end of it that port is."""
        if self.a_nic_id and self.a_nic_id == self.b_nic_id:
            raise ValidationError({"b_nic": "A cable cannot join a NIC to itself."})
        if self.a_switch_id and (self.a_switch_id, self.a_port) == (self.b_switch_id, self.b_port):
            raise ValidationError({"b_port": "A cable cannot join a port to itself."})
        others = Cable.objects.exclude(pk=self.pk)
        for side in ("a", "b"):
            nic_id = getattr(self, f"{side}_nic_id")
            switch_id, port = getattr(self, f"{side}_switch_id"), getattr(self, f"{side}_port")
            if nic_id:
                taken = others.filter(Q(a_nic_id=nic_id) | Q(b_nic_id=nic_id)).exists()
                field = f"{side}_nic"
            else:
                taken = others.filter(
                    Q(a_switch_id=switch_id, a_port=port) | Q(b_switch_id=switch_id, b_port=port)
                ).exists()
                field = f"{side}_port"
            if taken:
                raise ValidationError({field: "This port already has a cable."})
