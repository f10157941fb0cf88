from django.db import models


class FaultKind(models.TextChoices):
    """Faults a simulated node can be given; each changes what the tools print the way the real fault does."""

    MTU = "mtu", "MTU 1500 on a data NIC"
    PFC_OFF = "pfc_off", "PFC off on a priority"
    NVLINK_DOWN = "nvlink_down", "NVLink down"
    XID79 = "xid79", "GPU fallen off the bus (XID 79)"
    ECC = "ecc", "Uncorrectable ECC / row remap pending"
    THERMAL = "thermal", "Thermal slowdown"
    PCIE_DOWNTRAINED = "pcie_downtrained", "PCIe link downtrained"
    NIC_DOWN = "nic_down", "NIC link down"
    DISK_FULL = "disk_full", "Disk full"
    CORRUPT_CHECKPOINT = "corrupt_checkpoint", "Corrupt checkpoint"
    STRAGGLER = "straggler", "Straggler node"
    PTP_UNSYNCED = "ptp_unsynced", "PTP clock not synchronised"


class FaultTarget(models.TextChoices):
    """What a fault kind's target names."""

    GPU = "gpu", "GPU index"
    NIC = "nic", "NIC name"
    PRIORITY = "priority", "PFC priority (0-7)"
    MOUNT = "mount", "Mount point"
    FILE = "file", "Checkpoint file"
    NODE = "node", "The whole node"


FAULT_TARGETS = {
    FaultKind.MTU: FaultTarget.NIC,
    FaultKind.PFC_OFF: FaultTarget.PRIORITY,
    FaultKind.NVLINK_DOWN: FaultTarget.GPU,
    FaultKind.XID79: FaultTarget.GPU,
    FaultKind.ECC: FaultTarget.GPU,
    FaultKind.THERMAL: FaultTarget.GPU,
    FaultKind.PCIE_DOWNTRAINED: FaultTarget.GPU,
    FaultKind.NIC_DOWN: FaultTarget.NIC,
    FaultKind.DISK_FULL: FaultTarget.MOUNT,
    FaultKind.CORRUPT_CHECKPOINT: FaultTarget.FILE,
    FaultKind.STRAGGLER: FaultTarget.NODE,
    FaultKind.PTP_UNSYNCED: FaultTarget.NODE,
}

# Severity colour per kind, for badges: red takes the node out of work, orange degrades it.
FAULT_KIND_COLOURS = {
    FaultKind.MTU: "orange",
    FaultKind.PFC_OFF: "orange",
    FaultKind.NVLINK_DOWN: "orange",
    FaultKind.XID79: "red",
    FaultKind.ECC: "red",
    FaultKind.THERMAL: "orange",
    FaultKind.PCIE_DOWNTRAINED: "orange",
    FaultKind.NIC_DOWN: "red",
    FaultKind.DISK_FULL: "red",
    FaultKind.CORRUPT_CHECKPOINT: "red",
    FaultKind.STRAGGLER: "orange",
    FaultKind.PTP_UNSYNCED: "orange",
}
