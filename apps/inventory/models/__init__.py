from apps.inventory.models.access import SshAccess
from apps.inventory.models.fabric import Cable, Switch
from apps.inventory.models.imports import ImportFile
from apps.inventory.models.nodes import Firmware, Gpu, GpuSku, Nic, Node, SshHostKey
from apps.inventory.models.pdus import Pdu
from apps.inventory.models.rackscale import (
    CoolantLoop,
    ImexDomain,
    LeakSensor,
    NvlinkDomain,
    NvlinkPartition,
    NvlinkSwitchTray,
    PowerShelf,
)
from apps.inventory.models.sites import Rack, Site, Tag
from apps.inventory.models.storage import StorageTier, Volume

__all__ = [
    "Cable",
    "CoolantLoop",
    "Firmware",
    "Gpu",
    "GpuSku",
    "ImexDomain",
    "ImportFile",
    "LeakSensor",
    "Nic",
    "Node",
    "NvlinkDomain",
    "NvlinkPartition",
    "NvlinkSwitchTray",
    "Pdu",
    "PowerShelf",
    "Rack",
    "Site",
    "SshAccess",
    "SshHostKey",
    "StorageTier",
    "Switch",
    "Tag",
    "Volume",
]
