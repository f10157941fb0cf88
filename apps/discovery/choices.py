from django.db import models


class DifferenceState(models.TextChoices):
    """What became of a difference between the inventory and what a node reported."""

    OPEN = "open", "Open"
    ACCEPTED = "accepted", "Accepted"
    DISMISSED = "dismissed", "Dismissed"
    FILLED = "filled", "Filled in"
    SUPERSEDED = "superseded", "Superseded"


DIFFERENCE_DECIDED = frozenset({DifferenceState.ACCEPTED, DifferenceState.DISMISSED})
DIFFERENCE_STATE_COLOURS = {
    DifferenceState.OPEN: "red",
    DifferenceState.ACCEPTED: "green",
    DifferenceState.DISMISSED: "black",
    DifferenceState.FILLED: "blue",
    DifferenceState.SUPERSEDED: "black",
}


class ObjectType(models.TextChoices):
    """The kind of inventory object a difference is about."""

    NODE = "node", "Node"
    GPU = "gpu", "GPU"
    NIC = "nic", "NIC"
    FIRMWARE = "firmware", "Firmware"
    VOLUME = "volume", "Volume"


class FactFamily(models.TextChoices):
    """A group of facts read by one kind of command (a column family of the discovery matrix)."""

    GPUS = "gpus", "GPUs (nvidia-smi --query-gpu)"
    TOPOLOGY = "topology", "GPU/NIC topology (nvidia-smi topo -m)"
    LINKS = "links", "Interfaces (ip -j link)"
    NICS = "nics", "Data NICs (ethtool, ethtool -i, mlnx_qos)"
    BIOS = "bios", "BIOS version"
    CPU = "cpu", "CPU (lscpu -J)"
    NUMA = "numa", "NUMA and memory (numactl -H)"
    DISKS = "disks", "Block devices (lsblk -J)"
    # What the NICs column reads of each interface (facts and could-not-run reasons are keyed "<part>:<interface>").
    SPEED = "speed", "Link speed (ethtool)"
    NIC_FIRMWARE = "nic-fw", "NIC driver and firmware (ethtool -i)"
    QOS = "qos", "PFC / trust (mlnx_qos)"


# Differences a step of the deployment plan puts right on the node when the inventory is what is right:
# (object type, field) -> the step whose fixes do it (apps/deployments/steps).
NODE_FIXES = {
    (ObjectType.NIC, "mtu"): "mtu",  # ip link set dev NIC mtu N
    (ObjectType.NIC, "pfc_priorities"): "roce",  # mlnx_qos -i NIC --pfc ...
}
