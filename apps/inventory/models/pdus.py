from decimal import Decimal

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from apps.core.audit import AuditedModel
from apps.core.models import PublicModel
from apps.core.validators import name_validator
from apps.inventory.choices import PduFeed, RackFace, RackSide
from apps.inventory.models.mounting import Mounted, check_mounting, mounted_besides_nodes, mounted_nodes
from apps.inventory.models.mounting import rack_units as units_label
from apps.inventory.models.sites import Rack


class Pdu(AuditedModel, PublicModel):
    """A rack's power distribution unit on feed A or B: vertical (0U) on a side of the rear, or in U slots of a face.
    Its capacity is its maximum power, or its rated current times its voltage."""

    name = models.CharField(max_length=64, unique=True, validators=[name_validator])
    rack = models.ForeignKey(Rack, on_delete=models.PROTECT, related_name="pdus")
    model = models.CharField(max_length=64, blank=True)
    feed = models.CharField(max_length=1, choices=PduFeed.choices)
    max_power_w = models.PositiveIntegerField(
        "maximum power (W)", null=True, blank=True, validators=[MinValueValidator(1)],
        help_text="Empty when the rating is given as amps × volts.",
    )  # fmt: skip
    rated_amps = models.DecimalField(
        max_digits=5, decimal_places=1, null=True, blank=True, validators=[MinValueValidator(Decimal("0.1"))]
    )
    rated_volts = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(1000)]
    )
    outlet_count = models.PositiveSmallIntegerField(validators=[MinValueValidator(1), MaxValueValidator(128)])
    position = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)],
        help_text="Lowest U of a PDU mounted in the units; empty for a vertical (0U) PDU.",
    )  # fmt: skip
    u_height = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1), MaxValueValidator(4)])
    face = models.CharField(max_length=8, choices=RackFace.choices, default=RackFace.REAR)
    side = models.CharField(
        max_length=8, choices=RackSide.choices, blank=True, help_text="The rear side a vertical (0U) PDU hangs on."
    )

    class Meta:
        ordering = ["rack__name", "feed", "name"]
        verbose_name = "PDU"
        constraints = [
            models.CheckConstraint(
                condition=Q(position__isnull=True, side__in=["left", "right"]) | Q(position__isnull=False, side=""),
                name="pdu_zero_u_on_a_side_or_in_units",
                violation_error_message="A PDU is either vertical (0U) on a side or in U slots, not both.",
            ),
            models.CheckConstraint(
                condition=Q(max_power_w__isnull=False) | Q(rated_amps__isnull=False, rated_volts__isnull=False),
                name="pdu_has_a_rating",
                violation_error_message="Give the maximum power, or the rated amps and volts.",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def zero_u(self) -> bool:
        return self.position is None

    @property
    def capacity_w(self) -> int:
        if self.max_power_w is not None:
            return self.max_power_w
        return int(self.rated_amps * self.rated_volts)

    @property
    def mounting(self) -> str:
        if self.zero_u:
            return f"0U, rear {self.side}"
        return f"{units_label(self.position, self.u_height)} {self.face}"

    def clean(self) -> None:
        super().clean()
        errors = {}
        if self.position is None and not self.side:
            errors["side"] = "A vertical (0U) PDU hangs on the left or right of the rear."
        if self.position is not None and self.side:
            errors["side"] = "A PDU in U slots has no side; leave it empty or clear the position."
        if self.max_power_w is None and (self.rated_amps is None or self.rated_volts is None):
            errors["max_power_w"] = "Give the maximum power, or the rated amps and volts."
        if errors:
            raise ValidationError(errors)
        if self.position is not None and self.rack_id:
            others = mounted_nodes(self.rack_id) + mounted_besides_nodes(self.rack_id, exclude=self)
            check_mounting(
                self.rack, Mounted(self.name, self.position, self.u_height, self.face), others, field="position"
            )
