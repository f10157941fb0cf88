from decimal import Decimal

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q

from apps.core.audit import AuditedModel
from apps.core.models import PublicModel
from apps.core.validators import name_validator
from apps.inventory.choices import StorageTierKind
from apps.inventory.models.nodes import Node
from apps.inventory.models.sites import Site

mount_point_validator = RegexValidator(r"^/[A-Za-z0-9._/-]*\Z", "Enter an absolute path such as /data/hot.")


class StorageTier(AuditedModel, PublicModel):
    """A class of storage (hot NVMe, warm SSD, cold object) with what it delivers and what it must deliver."""

    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="storage_tiers")
    name = models.CharField(max_length=64, validators=[name_validator])
    kind = models.CharField(max_length=8, choices=StorageTierKind.choices)
    medium = models.CharField(max_length=64, help_text="e.g. NVMe RAID, SAS SSD, object store.")
    bandwidth_gb_per_s = models.DecimalField(
        "bandwidth (GB/s)", max_digits=7, decimal_places=1, validators=[MinValueValidator(Decimal("0.1"))]
    )
    required_bandwidth_gb_per_s = models.DecimalField(
        "required bandwidth (GB/s)",
        max_digits=7,
        decimal_places=1,
        default=0,
        validators=[MinValueValidator(Decimal(0))],
    )
    capacity_tb = models.DecimalField(
        "capacity (TB)", max_digits=9, decimal_places=1, validators=[MinValueValidator(Decimal("0.1"))]
    )

    class Meta:
        ordering = ["site__name", "kind", "name"]
        constraints = [
            models.UniqueConstraint(fields=["site", "name"], name="storagetier_unique_name_per_site"),
            models.CheckConstraint(condition=Q(bandwidth_gb_per_s__gt=0), name="storagetier_bandwidth_positive"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def meets_requirement(self) -> bool:
        return self.bandwidth_gb_per_s >= self.required_bandwidth_gb_per_s


class Volume(AuditedModel, PublicModel):
    """Storage of a tier mounted on a node."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="volumes")
    tier = models.ForeignKey(StorageTier, on_delete=models.PROTECT, related_name="volumes")
    mount_point = models.CharField(max_length=255, validators=[mount_point_validator])
    capacity_gb = models.PositiveIntegerField(validators=[MinValueValidator(1)])

    class Meta:
        ordering = ["node__hostname", "mount_point"]
        constraints = [
            models.UniqueConstraint(
                fields=["node", "mount_point"],
                name="volume_unique_mount_per_node",
                violation_error_message="This node already has a volume mounted here.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.node.hostname}:{self.mount_point}"

    def clean(self) -> None:
        super().clean()
        if ".." in self.mount_point.split("/"):
            raise ValidationError({"mount_point": "A mount point cannot contain '..'."})
