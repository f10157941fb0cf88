from django.db import models


class NodeRole(models.TextChoices):
    COMPUTE = "compute", "Compute"
    MANAGEMENT = "management", "Management"
    STORAGE = "storage", "Storage"
    SWITCH_HOST = "switch-host", "Switch host"


class NodeStatus(models.TextChoices):
    PLANNED = "planned", "Planned"
    RACKED = "racked", "Racked"
    PROVISIONING = "provisioning", "Provisioning"
    READY = "ready", "Ready"
    DEGRADED = "degraded", "Degraded"
    FAILED = "failed", "Failed"
    RETIRED = "retired", "Retired"


NODE_STATUS_COLOURS = {
    NodeStatus.PLANNED: "grey",
    NodeStatus.RACKED: "blue",
    NodeStatus.PROVISIONING: "purple",
    NodeStatus.READY: "green",
    NodeStatus.DEGRADED: "orange",
    NodeStatus.FAILED: "red",
    NodeStatus.RETIRED: "black",
}
# The one table of status changes: where a node may go from each status. The edit form, the API and bulk edits go
# through Node.clean (allowed_next_statuses); a verified deployment making a node ready is the documented exception.
NODE_STATUS_TRANSITIONS = {
    NodeStatus.PLANNED: [NodeStatus.RACKED, NodeStatus.RETIRED],
    NodeStatus.RACKED: [NodeStatus.PROVISIONING, NodeStatus.PLANNED, NodeStatus.RETIRED],
    NodeStatus.PROVISIONING: [NodeStatus.READY, NodeStatus.FAILED, NodeStatus.RACKED],
    NodeStatus.READY: [NodeStatus.DEGRADED, NodeStatus.FAILED, NodeStatus.PROVISIONING, NodeStatus.RETIRED],
    NodeStatus.DEGRADED: [NodeStatus.READY, NodeStatus.FAILED, NodeStatus.PROVISIONING, NodeStatus.RETIRED],
    NodeStatus.FAILED: [NodeStatus.PROVISIONING, NodeStatus.RACKED, NodeStatus.RETIRED],
    NodeStatus.RETIRED: [NodeStatus.PLANNED],
}


def allowed_next_statuses(current: str) -> list[str]:
    return [str(status) for status in NODE_STATUS_TRANSITIONS.get(current, [])]


# Nodes that can take work or be brought up; retired and planned ones cannot.
NODE_STATUS_IN_SERVICE = [NodeStatus.RACKED, NodeStatus.PROVISIONING, NodeStatus.READY, NodeStatus.DEGRADED]


class GpuHealth(models.TextChoices):
    HEALTHY = "healthy", "Healthy"
    WARNING = "warning", "Warning"
    FAILED = "failed", "Failed"
    MISSING = "missing", "Missing"
    UNKNOWN = "unknown", "Unknown"


GPU_HEALTH_COLOURS = {
    GpuHealth.HEALTHY: "green",
    GpuHealth.WARNING: "orange",
    GpuHealth.FAILED: "red",
    GpuHealth.MISSING: "red",
    GpuHealth.UNKNOWN: "grey",
}


class GpuPresence(models.TextChoices):
    """Whether the GPU is there, as discovery (or the inventory's import) last said: the one input to `Gpu.health`
    that is not a health event."""

    PRESENT = "present", "Present"
    MISSING = "missing", "Missing"
    UNKNOWN = "unknown", "Not yet seen"


# What a GPU's presence alone makes of its health, with no open health event on it (apps/health adds the events).
HEALTH_OF_PRESENCE = {
    GpuPresence.PRESENT: GpuHealth.HEALTHY,
    GpuPresence.MISSING: GpuHealth.MISSING,
    GpuPresence.UNKNOWN: GpuHealth.UNKNOWN,
}


class HealthState(models.TextChoices):
    """A node's health as its open health events say: critical or major → unhealthy, minor → degraded. apps/health
    writes it on the node (`Node.health_state`) and names it `NodeState`."""

    HEALTHY = "healthy", "Healthy"
    DEGRADED = "degraded", "Degraded"
    UNHEALTHY = "unhealthy", "Unhealthy"


HEALTH_STATE_COLOURS = {HealthState.HEALTHY: "green", HealthState.DEGRADED: "orange", HealthState.UNHEALTHY: "red"}


class PowerState(models.TextChoices):
    """A node's chassis power as its BMC last read it (apps/monitoring writes `Node.power_state`); blank: never
    read."""

    ON = "on", "On"
    OFF = "off", "Off"


class NicTransport(models.TextChoices):
    ROCE = "roce", "RoCE"
    INFINIBAND = "ib", "InfiniBand"
    ETHERNET = "ethernet", "Ethernet"


class NicPurpose(models.TextChoices):
    DATA = "data", "Data (GPU fabric)"
    MANAGEMENT = "management", "Management"
    STORAGE = "storage", "Storage"


# The MTU a NIC may have, the one range every app uses (the Nic model, the deployment plan, the simulator): Linux's
# for Ethernet, from IPv4's minimum of 68 bytes (RFC 791) to the 9216-byte jumbo frame mlx5 and ice NICs accept.
MTU_MIN, MTU_MAX = 68, 9216


class Plane(models.TextChoices):
    A = "A", "Plane A"
    B = "B", "Plane B"
    MANAGEMENT = "mgmt", "Management"


class SwitchTier(models.TextChoices):
    LEAF = "leaf", "Leaf"
    SPINE = "spine", "Spine"
    CORE = "core", "Core"  # the super-spine tier that joins the pods of a three-tier fabric
    MANAGEMENT = "management", "Management"


class RackFace(models.TextChoices):
    """The face of a rack a device is mounted on. Nodes are full depth: they fill both faces of their units."""

    FRONT = "front", "Front"
    REAR = "rear", "Rear"


class PduFeed(models.TextChoices):
    A = "A", "Feed A"
    B = "B", "Feed B"


class CoolantLoopKind(models.TextChoices):
    """Where a liquid-cooled rack's coolant distribution unit sits."""

    IN_RACK_CDU = "in_rack_cdu", "In-rack CDU"
    IN_ROW_CDU = "in_row_cdu", "In-row CDU"
    FACILITY = "facility", "Facility water (liquid-to-liquid)"


class RackSide(models.TextChoices):
    """The side of a rack's rear a vertical (0U) PDU hangs on."""

    LEFT = "left", "Left"
    RIGHT = "right", "Right"


class CableMedium(models.TextChoices):
    DAC = "dac", "Copper (DAC)"
    AOC = "aoc", "Active optical (AOC)"
    FIBER = "fiber", "Fibre with transceivers"
    CAT6 = "cat6", "Twisted pair"


class StorageTierKind(models.TextChoices):
    HOT = "hot", "Hot"
    WARM = "warm", "Warm"
    COLD = "cold", "Cold"


class FirmwareComponent(models.TextChoices):
    BIOS = "bios", "BIOS"
    BMC = "bmc", "BMC"
    GPU_VBIOS = "gpu_vbios", "GPU VBIOS"
    NIC_FIRMWARE = "nic_firmware", "NIC firmware"


class HostKeyState(models.TextChoices):
    TRUSTED = "trusted", "Trusted"
    PENDING = "pending", "Waiting for approval"
    REVOKED = "revoked", "Revoked"
