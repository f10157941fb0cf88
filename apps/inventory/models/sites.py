from decimal import Decimal

from django.core.validators import MinValueValidator, RegexValidator
from django.db import models

from apps.core.audit import AuditedModel
from apps.core.models import PublicModel
from apps.core.validators import name_validator

slug_validator = RegexValidator(r"^[a-z0-9][a-z0-9-]*\Z", "Use lower-case letters, digits and dashes.")


class Site(AuditedModel, PublicModel):
    """A data centre or hall holding racks."""

    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=100, unique=True, validators=[slug_validator])
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Rack(AuditedModel, PublicModel):
    """A rack in a row of a site, with its height in U and the power it may draw."""

    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="racks")
    name = models.CharField(max_length=64, validators=[name_validator])
    row = models.CharField(max_length=32, blank=True)
    position = models.PositiveSmallIntegerField(default=1, help_text="Position of the rack in its row.")
    u_height = models.PositiveSmallIntegerField(default=42, validators=[MinValueValidator(1)])
    power_budget_kw = models.DecimalField(
        max_digits=6,
        decimal_places=1,
        validators=[MinValueValidator(Decimal("0.1"))],
        help_text="Power the rack may draw, kW.",
    )

    class Meta:
        ordering = ["site__name", "row", "position", "name"]
        constraints = [
            models.UniqueConstraint(fields=["site", "name"], name="rack_unique_name_per_site"),
            models.CheckConstraint(condition=models.Q(u_height__gte=1), name="rack_u_height_positive"),
        ]

    def __str__(self) -> str:
        return self.name


class Tag(AuditedModel, PublicModel):
    """A free label for nodes (a pool, a customer, a maintenance window)."""

    name = models.CharField(max_length=64, unique=True)
    slug = models.SlugField(max_length=64, unique=True, validators=[slug_validator])
    colour = models.CharField(max_length=7, default="#6c757d", validators=[RegexValidator(r"^#[0-9a-fA-F]{6}\Z")])

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
