import re
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q

from apps.core.audit import AuditedModel
from apps.core.choices import Transport
from apps.core.models import PublicModel
from apps.core.validators import name_validator
from apps.inventory.choices import (
    GPU_HEALTH_COLOURS,
    HEALTH_OF_PRESENCE,
    HEALTH_STATE_COLOURS,
    MTU_MAX,
    MTU_MIN,
    NODE_STATUS_COLOURS,
    NODE_STATUS_IN_SERVICE,
    FirmwareComponent,
    GpuHealth,
    GpuPresence,
    HealthState,
    HostKeyState,
    NicPurpose,
    NicTransport,
    NodeRole,
    NodeStatus,
    Plane,
    PowerState,
    allowed_next_statuses,
)
from apps.inventory.hostkeys import fingerprint_of
from apps.inventory.models.mounting import Mounted, check_mounting, mounted_besides_nodes, mounted_nodes
from apps.inventory.models.mounting import rack_units as units_label
from apps.inventory.models.sites import Rack, Tag

hostname_validator = RegexValidator(
    r"^(?=.{1,253}\Z)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\Z",
    "Enter a valid host name (letters, digits, dashes and dots).",
)
interface_name_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,14}\Z", "Enter a Linux interface name (up to 15 letters, digits, . _ - : @)."
)
pci_address_validator = RegexValidator(
    r"^([0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\Z", "Enter a PCI address such as 0000:18:00.0."
)
mac_validator = RegexValidator(r"^([0-9a-f]{2}:){5}[0-9a-f]{2}\Z", "Enter a MAC address such as 0c:42:a1:00:00:01.")
version_validator = RegexValidator(r"^[A-Za-z0-9][A-Za-z0-9._+:-]{0,63}\Z", "Enter a version string.")


class GpuSku(AuditedModel, PublicModel):
    """A GPU model with its datasheet figures and the reference values acceptance checks are measured against."""

    name = models.CharField(max_length=64, unique=True, validators=[name_validator])
    vendor = models.CharField(max_length=32, default="NVIDIA")
    architecture = models.CharField(max_length=32)
    form_factor = models.CharField(max_length=16, default="SXM")
    hbm_gib = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    mem_bandwidth_tb_per_s = models.DecimalField(
        "datasheet memory bandwidth (TB/s)",
        max_digits=5,
        decimal_places=2,
        validators=[MinValueValidator(Decimal("0.01"))],
    )
    mem_bandwidth_reference_tb_per_s = models.DecimalField(
        "achievable memory bandwidth (TB/s)",
        max_digits=5,
        decimal_places=2,
        validators=[MinValueValidator(Decimal("0.01"))],
        help_text="What a healthy card measures (device-to-device copy); acceptance thresholds are a share of it.",
    )
    nvlink_gb_per_s = models.PositiveIntegerField(
        "NVLink bandwidth (GB/s)", default=0, help_text="0 when the SKU has none."
    )
    tdp_w = models.PositiveIntegerField("TDP (W)", validators=[MinValueValidator(1)])
    min_power_limit_w = models.PositiveIntegerField(
        "minimum power limit (W)",
        default=200,
        validators=[MinValueValidator(1)],
        help_text="The lowest power limit the driver accepts (nvidia-smi -q -d POWER, Min Power Limit); the "
        "highest is the TDP. Power policies keep within them.",
    )
    bf16_dense_tflops = models.DecimalField(max_digits=7, decimal_places=1, validators=[MinValueValidator(Decimal(0))])
    fp8_dense_tflops = models.DecimalField(
        max_digits=7, decimal_places=1, null=True, blank=True, help_text="Empty when the SKU has no FP8."
    )
    pcie_gen = models.PositiveSmallIntegerField(default=5, validators=[MinValueValidator(1), MaxValueValidator(6)])

    class Meta:
        ordering = ["name"]
        verbose_name = "GPU SKU"
        constraints = [
            models.CheckConstraint(
                condition=Q(mem_bandwidth_reference_tb_per_s__lte=models.F("mem_bandwidth_tb_per_s")),
                name="gpusku_reference_not_above_datasheet",
                violation_error_message="The achievable bandwidth cannot exceed the datasheet bandwidth.",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def reference_share_of_datasheet(self) -> float:
        return float(self.mem_bandwidth_reference_tb_per_s / self.mem_bandwidth_tb_per_s)


def _count_per_node(model) -> models.Subquery:
    rows = model.objects.filter(node=models.OuterRef("pk")).order_by()
    return models.Subquery(rows.annotate(count=models.Func(models.F("pk"), function="COUNT")).values("count"))


class NodeQuerySet(models.QuerySet):
    def compute(self) -> "NodeQuerySet":
        return self.filter(role=NodeRole.COMPUTE)

    def in_service(self) -> "NodeQuerySet":
        return self.filter(status__in=NODE_STATUS_IN_SERVICE)

    def drained(self) -> "NodeQuerySet":
        return self.filter(drained_at__isnull=False)

    def undrained(self) -> "NodeQuerySet":
        return self.filter(drained_at__isnull=True)

    def with_counts(self) -> "NodeQuerySet":
        # Correlated subqueries, not COUNT DISTINCT over the GPU x NIC join: that ran for every node before LIMIT,
        # ~7 s a page at 10,000 nodes on SQLite (bench/api_nodes.py).
        return self.annotate(gpu_count=_count_per_node(Gpu), nic_count=_count_per_node(Nic))


class Node(AuditedModel, PublicModel):
    """A server: an 8-GPU compute node, a management or storage node, or a host running switch software."""

    hostname = models.CharField(max_length=253, unique=True, validators=[hostname_validator])
    role = models.CharField(max_length=16, choices=NodeRole.choices, default=NodeRole.COMPUTE)
    status = models.CharField(max_length=16, choices=NodeStatus.choices, default=NodeStatus.PLANNED)
    rack = models.ForeignKey(Rack, null=True, blank=True, on_delete=models.PROTECT, related_name="nodes")
    u_position = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)], help_text="Lowest U the node occupies."
    )
    u_height = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1), MaxValueValidator(16)])
    management_ip = models.GenericIPAddressField(null=True, blank=True, unique=True)
    ssh_port = models.PositiveIntegerField(default=22, validators=[MinValueValidator(1), MaxValueValidator(65535)])
    bmc_address = models.CharField(max_length=253, blank=True, help_text="BMC host name or IP address.")
    gpu_sku = models.ForeignKey(GpuSku, null=True, blank=True, on_delete=models.PROTECT, related_name="nodes")
    expected_gpu_count = models.PositiveSmallIntegerField(default=0, validators=[MaxValueValidator(16)])
    cpu_model = models.CharField(max_length=128, blank=True)
    cpu_sockets = models.PositiveSmallIntegerField(default=0)
    cpu_cores = models.PositiveIntegerField(default=0)
    memory_gib = models.PositiveIntegerField(default=0)
    numa_nodes = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1), MaxValueValidator(64)])
    tags = models.ManyToManyField(Tag, blank=True, related_name="nodes")
    comments = models.TextField(blank=True)
    # A compute tray of a rack-scale system (apps/inventory/models/rackscale.py): its NVLink domain and slot.
    nvlink_domain = models.ForeignKey(
        "inventory.NvlinkDomain", null=True, blank=True, on_delete=models.PROTECT, related_name="compute_trays"
    )
    tray_slot = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)], help_text="The compute tray's slot in its domain."
    )
    # Drained: kept out of new deployments and benchmarks unless named by host name (services.drain_nodes).
    drained_at = models.DateTimeField(null=True, blank=True, help_text="Since when the node is drained; empty if not.")
    drain_reason = models.CharField(max_length=200, blank=True)
    drained_until = models.DateTimeField(null=True, blank=True, help_text="When the drain is expected to end.")
    transport = models.CharField(
        max_length=8,
        blank=True,
        choices=Transport.choices,
        help_text="How work reaches this node when a request names no transport; blank: the install's default. "
        "The demo's nodes are loaded with sim (the simulator) until an operator points them at real nodes.",
    )
    # Derived, never edited: apps/health writes it whenever an open event on the node or its parts (GPUs, NICs,
    # cables, BMC…) is recorded, worsens or is cleared, so lists read it without querying events per row.
    health_state = models.CharField(
        max_length=16,
        choices=HealthState.choices,
        default=HealthState.HEALTHY,
        editable=False,
        db_index=True,
        help_text="What the node's open health events say (docs/health.md).",
    )
    # Derived, never edited: apps/monitoring writes it when a BMC poll or power action reads a change, so the rack
    # page, the health producers and remediation know a node is off on purpose without asking its BMC.
    power_state = models.CharField(
        max_length=4,
        choices=PowerState.choices,
        blank=True,
        editable=False,
        help_text="The chassis power as the node's BMC last read it; blank: never read.",
    )
    power_state_since = models.DateTimeField(null=True, blank=True, editable=False)

    objects = NodeQuerySet.as_manager()

    class Meta:
        ordering = ["hostname"]
        constraints = [
            models.UniqueConstraint(
                fields=["rack", "u_position"],
                condition=Q(rack__isnull=False, u_position__isnull=False),
                name="node_unique_rack_position",
                violation_error_message="Another node already sits at this rack position.",
            ),
            models.UniqueConstraint(
                fields=["nvlink_domain", "tray_slot"],
                condition=Q(nvlink_domain__isnull=False),
                name="node_unique_tray_slot",
                violation_error_message="Another compute tray already has this slot in the NVLink domain.",
            ),
        ]

    def __str__(self) -> str:
        return self.hostname

    def clean(self) -> None:
        super().clean()
        if self.u_position is not None and self.rack_id is None:
            raise ValidationError({"u_position": "A rack position needs a rack."})
        if self.rack_id and self.u_position is not None:
            self._check_fits_in_rack()
        if self.nvlink_domain_id:
            self._check_tray()
        self._check_status_transition()

    def _check_tray(self) -> None:
        domain, spec = self.nvlink_domain, self.nvlink_domain.spec
        if self.tray_slot is None:
            raise ValidationError({"tray_slot": f"A compute tray of {domain} needs its slot (1–{spec.compute_trays})."})
        if self.tray_slot > spec.compute_trays:
            raise ValidationError({"tray_slot": f"A {spec.name} has compute trays 1–{spec.compute_trays}."})
        if self.rack_id != domain.rack_id:
            raise ValidationError(
                {"nvlink_domain": f"{domain} spans rack {domain.rack}; {self.hostname} is not in it."}
            )

    def _check_status_transition(self) -> None:
        before = getattr(self, "_audit_loaded", {}).get("status")
        if before is None or before == self.status:
            return  # a new node may start in any status
        allowed = allowed_next_statuses(before)
        if self.status not in allowed:
            names = ", ".join(allowed) or "none"
            raise ValidationError(
                {"status": f"A {before} node cannot become {self.status}; from {before} it may become: {names}."}
            )

    @property
    def is_drained(self) -> bool:
        return self.drained_at is not None

    @property
    def is_powered_off(self) -> bool:
        return self.power_state == PowerState.OFF

    def _check_fits_in_rack(self) -> None:
        device = Mounted(self.hostname, self.u_position, self.u_height)
        check_mounting(self.rack, device, self.rack_neighbours(), field="u_position")

    def rack_neighbours(self) -> list[Mounted]:
        """The other devices placed in this node's rack (nodes, switches, U-mounted PDUs). An import sets
        `_known_neighbours` (a callable) from what it holds, so that checking a row costs no query."""
        known = getattr(self, "_known_neighbours", None)
        if known is not None:
            return known(self)
        return mounted_nodes(self.rack_id, exclude=self) + mounted_besides_nodes(self.rack_id)

    @property
    def status_colour(self) -> str:
        return NODE_STATUS_COLOURS[self.status]

    @property
    def health_state_colour(self) -> str:
        return HEALTH_STATE_COLOURS[self.health_state]

    @property
    def rack_units(self) -> str:
        return units_label(self.u_position, self.u_height)


class Gpu(AuditedModel, PublicModel):
    """One GPU in a node, as inventoried or discovered."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveSmallIntegerField(validators=[MaxValueValidator(15)])
    sku = models.ForeignKey(GpuSku, on_delete=models.PROTECT, related_name="gpus")
    uuid = models.CharField(
        "UUID",
        max_length=64,
        null=True,
        blank=True,
        unique=True,
        validators=[RegexValidator(r"^GPU-[0-9a-fA-F-]{36}\Z", "Enter a GPU UUID such as GPU-xxxxxxxx-xxxx-….")],
    )
    serial = models.CharField(max_length=64, blank=True)
    pci_bus_id = models.CharField(max_length=16, blank=True, validators=[pci_address_validator])
    numa_node = models.PositiveSmallIntegerField(null=True, blank=True)
    pcie_switch = models.CharField(
        max_length=32, blank=True, help_text="PCIe switch the GPU sits under; NICs on the same switch are its peers."
    )
    presence = models.CharField(
        max_length=16,
        choices=GpuPresence.choices,
        default=GpuPresence.UNKNOWN,
        help_text="Whether the GPU is there, as discovery last found it (or as imported).",
    )
    # Derived, never edited: apps/health writes it from the presence and the GPU's open health events whenever either
    # changes (apps/health/services.gpu_health_of is the one mapping).
    health = models.CharField(max_length=16, choices=GpuHealth.choices, default=GpuHealth.UNKNOWN, editable=False)

    class Meta:
        ordering = ["node__hostname", "index"]
        verbose_name = "GPU"
        indexes = [
            # The census (apps/inventory/census.py) counts from it alone, and a rack's full-load estimate sums its
            # GPUs' TDP from it (apps/inventory/power.py), without reading the table.
            models.Index(fields=["node", "health", "sku"], name="gpu_node_health"),
            # The GPUs needing attention are few among tens of thousands: the pages listing them read this.
            models.Index(fields=["node"], condition=~models.Q(health="healthy"), name="gpu_not_healthy"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["node", "index"],
                name="gpu_unique_index_per_node",
                violation_error_message="This node already has a GPU with this index.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.node.hostname} GPU{self.index}"

    def clean(self) -> None:
        super().clean()
        if self._state.adding:
            # A new GPU has no health events yet: its presence says it all. (An import creates GPUs in bulk, with
            # no save signal; later changes of presence are apps/health's, which adds the open events.)
            self.health = HEALTH_OF_PRESENCE.get(self.presence, self.health)

    @property
    def health_colour(self) -> str:
        return GPU_HEALTH_COLOURS[self.health]


class Nic(AuditedModel, PublicModel):
    """A network interface of a node: a 400G RoCE data port on one plane, or the management port."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="nics")
    name = models.CharField(max_length=15, validators=[interface_name_validator])
    mac = models.CharField("MAC", max_length=17, null=True, blank=True, unique=True, validators=[mac_validator])
    purpose = models.CharField(max_length=16, choices=NicPurpose.choices, default=NicPurpose.DATA)
    speed_gbps = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    mtu = models.PositiveIntegerField(default=1500, validators=[MinValueValidator(MTU_MIN), MaxValueValidator(MTU_MAX)])
    rdma_capable = models.BooleanField(default=False)
    transport = models.CharField(max_length=16, choices=NicTransport.choices, default=NicTransport.ETHERNET)
    plane = models.CharField(max_length=8, choices=Plane.choices, blank=True)
    pfc_priorities = models.JSONField(
        default=list, blank=True, help_text="Priorities (0–7) with priority flow control on, e.g. [3]."
    )
    ecn_enabled = models.BooleanField(default=False)
    numa_node = models.PositiveSmallIntegerField(null=True, blank=True)
    pci_address = models.CharField(max_length=16, blank=True, validators=[pci_address_validator])
    pcie_switch = models.CharField(max_length=32, blank=True)
    link_up = models.BooleanField(default=True)
    peer_gpus = models.ManyToManyField(
        Gpu, blank=True, related_name="peer_nics", help_text="GPUs that share this NIC's PCIe switch."
    )

    class Meta:
        ordering = ["node__hostname", "name"]
        verbose_name = "NIC"
        constraints = [
            models.UniqueConstraint(
                fields=["node", "name"],
                name="nic_unique_name_per_node",
                violation_error_message="This node already has a NIC with this name.",
            ),
            models.CheckConstraint(
                condition=Q(mtu__gte=MTU_MIN, mtu__lte=MTU_MAX),
                name="nic_mtu_range",
                violation_error_message=f"MTU must be within {MTU_MIN}..{MTU_MAX}.",
            ),
            models.CheckConstraint(condition=Q(speed_gbps__gt=0), name="nic_speed_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.node.hostname}:{self.name}"

    def clean(self) -> None:
        super().clean()
        priorities = self.pfc_priorities
        if not isinstance(priorities, list) or any(
            not isinstance(p, int) or isinstance(p, bool) or not 0 <= p <= 7 for p in priorities
        ):
            raise ValidationError({"pfc_priorities": "Give a list of priorities between 0 and 7, e.g. [3]."})
        if len(set(priorities)) != len(priorities):
            raise ValidationError({"pfc_priorities": "A priority is listed twice."})
        if self.transport in (NicTransport.ROCE, NicTransport.INFINIBAND) and not self.rdma_capable:
            raise ValidationError({"rdma_capable": "A RoCE or InfiniBand NIC is RDMA capable."})


class Firmware(AuditedModel, PublicModel):
    """The version of one firmware component of a node (the BIOS, the BMC, a GPU's VBIOS, a NIC's firmware)."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="firmware")
    component = models.CharField(max_length=16, choices=FirmwareComponent.choices)
    target = models.CharField(
        max_length=32, blank=True, help_text="Which device, for per-device firmware (e.g. GPU0, ens1f0np0)."
    )
    version = models.CharField(max_length=64, validators=[version_validator])

    class Meta:
        ordering = ["node__hostname", "component", "target"]
        verbose_name_plural = "firmware"
        constraints = [
            models.UniqueConstraint(
                fields=["node", "component", "target"],
                name="firmware_unique_component",
                violation_error_message="This node already records a version for this component.",
            ),
        ]

    def __str__(self) -> str:
        where = f" {self.target}" if self.target else ""
        return f"{self.node.hostname} {self.get_component_display()}{where} {self.version}"


_OPENSSH_KEY = re.compile(r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/]+=*\Z")


class SshHostKey(AuditedModel, PublicModel):
    """A node's SSH host key. Connections verify against trusted keys only; new keys wait for an operator."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="host_keys")
    public_key = models.TextField(help_text="As in known_hosts: '<type> <base64>'.")
    fingerprint = models.CharField(
        max_length=64, blank=True, help_text="SHA256 fingerprint as ssh-keygen prints it; computed from the key."
    )
    state = models.CharField(max_length=16, choices=HostKeyState.choices, default=HostKeyState.PENDING)
    approved_by = models.ForeignKey(
        "accounts.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="approved_host_keys"
    )

    class Meta:
        ordering = ["node__hostname", "-created"]
        verbose_name = "SSH host key"
        constraints = [
            models.UniqueConstraint(fields=["node", "fingerprint"], name="hostkey_unique_per_node"),
        ]

    def __str__(self) -> str:
        return f"{self.node.hostname} {self.key_type} {self.fingerprint}"

    @property
    def key_type(self) -> str:
        return self.public_key.split(" ", 1)[0]

    def clean(self) -> None:
        super().clean()
        self.public_key = " ".join(self.public_key.split()[:2])
        if not _OPENSSH_KEY.match(self.public_key):
            raise ValidationError({"public_key": "Enter an OpenSSH public key such as 'ssh-ed25519 AAAA…'."})
        self.fingerprint = fingerprint_of(self.public_key)

    def save(self, *args, **kwargs):
        if not self.fingerprint:
            self.fingerprint = fingerprint_of(self.public_key)
        super().save(*args, **kwargs)
