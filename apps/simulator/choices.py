"""The simulator's choices: the fault kinds an operator injects, and what a fault does to a training job."""

from django.db import models


class FaultKind(models.TextChoices):
    """SimFault.kind, in the order the faults page lists them; each has one entry in faults/kinds.py saying what it
    does to a node. A new kind is a member here, its entry there, and a migration that only alters the choices."""

    MTU = "mtu", "Wrong MTU on a data NIC"
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
    DEGRADED_CABLE = "degraded_cable", "Degraded cable (lower rate or CRC errors)"
    LATE_THERMAL = "late_thermal", "Thermal slowdown after sustained load"
    POWER_CAP = "power_cap", "Power capped below the default limit"
    DATALOADER_STALL = "dataloader_stall", "Data loader starves the GPUs"
    CO_LOCATED = "co_located", "Second trainer placed on the node"
    STORAGE_SLOW = "storage_slow", "Storage not responding (NFS / Lustre server)"
    NVSWITCH_TRAY_DOWN = "nvswitch_tray_down", "NVLink switch tray down (rack-scale domain)"
    TRAY_NVLINK_DEGRADED = "tray_nvlink_degraded", "A compute tray's NVLink links degraded"
    IMEX_PEER_LOST = "imex_peer_lost", "IMEX peer lost"
    COOLANT_FLOW_LOW = "coolant_flow_low", "Coolant flow low (rack's loop)"
    LEAK = "leak", "Coolant leak in a tray"
    NODE_HANG = "node_hang", "OS hung: the node answers no SSH, its BMC still answers"


class FaultEffect(models.TextChoices):
    """What a fault does to a training job with ranks on its node (apps/simulator/training.py), by which the job's
    log, its checkpoints and the runbooks that may be rehearsed against it are chosen."""

    NETWORK_HANG = "network_hang", "Hangs its ranks in a collective, with NET/IB warnings, until the watchdog fires"
    IO_HANG = "io_hang", "Hangs its ranks in data loading or checkpoint I/O, until the watchdog fires"
    LOADER_HANG = "loader_hang", "Hangs its ranks only when one data loader stall outlasts the watchdog"
    CRASH = "crash", "Kills its ranks: the GPU is gone"
    CHECKPOINTS = "checkpoints", "Spoils checkpoints: a save fails or a saved one is torn"
    SLOWS = "slows", "Slows the job without failing it: seen in its GPUs' utilisation, never in its log"


# What each kind does to a training job on its node; a kind not named here leaves the job running as before.
EFFECTS: dict[FaultKind, frozenset[FaultEffect]] = {
    FaultKind.MTU: frozenset({FaultEffect.NETWORK_HANG}),
    FaultKind.PFC_OFF: frozenset({FaultEffect.NETWORK_HANG}),
    FaultKind.XID79: frozenset({FaultEffect.CRASH}),
    FaultKind.THERMAL: frozenset({FaultEffect.SLOWS}),
    FaultKind.NIC_DOWN: frozenset({FaultEffect.NETWORK_HANG}),
    FaultKind.DISK_FULL: frozenset({FaultEffect.CHECKPOINTS}),
    FaultKind.CORRUPT_CHECKPOINT: frozenset({FaultEffect.CHECKPOINTS}),
    FaultKind.STORAGE_SLOW: frozenset({FaultEffect.IO_HANG}),
    FaultKind.STRAGGLER: frozenset({FaultEffect.SLOWS}),
    FaultKind.POWER_CAP: frozenset({FaultEffect.SLOWS}),
    FaultKind.DATALOADER_STALL: frozenset({FaultEffect.LOADER_HANG, FaultEffect.SLOWS}),
    FaultKind.CO_LOCATED: frozenset({FaultEffect.SLOWS}),
    # A hung kernel stops its ranks mid-step: the peers wait in the next collective until the watchdog fires.
    FaultKind.NODE_HANG: frozenset({FaultEffect.IO_HANG}),
}


def kinds_with(*effects: FaultEffect) -> tuple[FaultKind, ...]:
    """The fault kinds that have any of these effects on a training job, in the enum's order."""
    return tuple(kind for kind in FaultKind if EFFECTS.get(kind, frozenset()) & set(effects))
