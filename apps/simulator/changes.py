"""Command-made changes to a simulated node (an MTU set, a driver installed, a file written) and their effects.

A change is a key and a JSON value, stored as a SimChange row and applied to the state after the faults, so that a
command that sets MTU 9000 repairs an MTU-1500 fault. Keys:

- ``nic:<name>:mtu`` int, ``nic:<name>:pfc`` list of enabled priorities, ``nic:<name>:trust`` "dscp" or "pcp",
  ``nic:<name>:ecn`` bool, ``nic:<name>:channels`` int (combined RSS channels), ``nic:<name>:traffic`` int (the
  RDMA bytes the NIC has received from the runs across nodes: its ethtool -S counters grow with it)
- ``firmware:<component>`` str, for every device of that component (bios, bmc, gpu_vbios, nic_firmware)
- ``software:<name>`` str (driver, cuda, nccl, openmpi, torch, tensorflow)
- ``file:<absolute path>`` str content
- ``removed:<absolute path>`` int: what ``rm -rf`` of a training run's checkpoint freed, in bytes (on its volume)
- ``tiered:<digest of a file's first path>`` {"from": first path, "to": where it is now}: a modelled file `mv` moved
  (apps/simulator/tools/files.py)
- ``training:resume:<rendezvous id>:<node rank>`` dict: a relaunch of a training run (apps/simulator/training_faults)
- ``boot:last`` dict ``{"count", "at", "down_seconds"}``: the node's last simulated reboot (apps/simulator/boot.py)
- ``slurm:<host name>`` dict ``{"drain", "reason", "user", "at", "reboot", "next_state"}``: on the scheduler's
  controller, what slurmctld holds for a node after ``scontrol update`` / ``scontrol reboot`` (an empty dict: back
  in service) (apps/simulator/tools/scheduler.py)
- ``kube:<host name>`` dict ``{"unschedulable", "taints", "conditions"}``: on the scheduler's controller, what the
  Kubernetes API server holds for a node after ``kubectl cordon`` / ``taint``, and conditions a problem detector set
  (apps/simulator/tools/kube_apiserver.py)
- ``power:state`` dict ``{"on", "at"}``: the chassis power the BMC set (absent: on); off, the node answers nothing
- ``sel:<record id>`` dict: one record of the BMC's System Event Log (apps/simulator/sel.py)
- ``gpu:<index>:power_limit`` int watts (``nvidia-smi -i N -pl W``; the inventory's GPU index). Volatile: the
  driver forgets it at a reboot (``VOLATILE_PREFIXES``), so a simulated reboot removes it.
- ``gpu:<index>:remap_pending`` false: a GPU reset (``nvidia-smi -r -i N``) applied the pending row remaps
"""

from collections.abc import Iterable

from apps.inventory.choices import FirmwareComponent
from apps.simulator.state import SimulatedNode

NIC_ATTRIBUTES = ("mtu", "pfc", "trust", "ecn", "channels", "traffic")
FIRMWARE_COMPONENTS = (
    FirmwareComponent.BIOS,
    FirmwareComponent.BMC,
    FirmwareComponent.GPU_VBIOS,
    FirmwareComponent.NIC_FIRMWARE,
)
SOFTWARE = ("driver", "cuda", "nccl", "openmpi", "torch", "tensorflow")
PYTHON_PACKAGES = ("torch", "tensorflow")
KEY_MAX_LENGTH = 255
# Changes that live in the driver, not on disk: a reboot clears them.
VOLATILE_PREFIXES = ("gpu:",)
GPU_ATTRIBUTES = ("power_limit", "remap_pending")


def gpu_key(index: int, attribute: str) -> str:
    return f"gpu:{index}:{attribute}"


def nic_key(nic: str, attribute: str) -> str:
    return f"nic:{nic}:{attribute}"


def apply_change(state: SimulatedNode, key: str, value) -> bool:
    """Apply one change to the state; False (and nothing changed) when the key names nothing this node has."""
    family, _, rest = key.partition(":")
    if family == "nic":
        name, _, attribute = rest.rpartition(":")
        nic = state.nic(name)
        if nic is None or attribute not in NIC_ATTRIBUTES:
            return False
        if attribute == "mtu":
            nic.mtu = int(value)
        elif attribute == "pfc":
            nic.pfc_priorities = sorted({int(priority) for priority in value})
        elif attribute == "trust":
            nic.trust = str(value)
        elif attribute == "ecn":
            nic.ecn = bool(value)
        elif attribute == "traffic":
            nic.traffic_bytes = int(value)
        else:
            nic.channels = int(value)
    elif family == "firmware":
        if rest == FirmwareComponent.BIOS:
            state.bios = str(value)
        elif rest == FirmwareComponent.BMC:
            state.bmc = str(value)
        elif rest == FirmwareComponent.GPU_VBIOS:
            for gpu in state.gpus:
                gpu.vbios = str(value)
        elif rest == FirmwareComponent.NIC_FIRMWARE:
            for nic in state.nics:
                nic.firmware = str(value)
        else:
            return False
    elif family == "software":
        if rest in PYTHON_PACKAGES:
            state.python_packages[rest] = str(value)
        elif rest in SOFTWARE:
            attribute = {"driver": "driver_version", "cuda": "cuda_toolkit"}.get(rest, f"{rest}_version")
            setattr(state, attribute, str(value))
        else:
            return False
    elif family == "gpu":
        index, _, attribute = rest.partition(":")
        gpu = next((gpu for gpu in state.gpus if str(gpu.index) == index), None)
        if gpu is None or attribute not in GPU_ATTRIBUTES:
            return False
        if attribute == "remap_pending":
            gpu.remap_pending = bool(value)
        else:
            gpu.power_limit_w = int(value)
    elif family == "file" and rest.startswith("/"):
        state.files[rest] = str(value)
    elif family == "removed" and rest.startswith("/"):
        volume = max(
            (v for v in state.volumes if rest.startswith(v.mount_point.rstrip("/") + "/")),
            key=lambda v: len(v.mount_point),
            default=None,
        )
        if volume is None:
            return False
        volume.freed_bytes += int(value or 0)
    elif family == "boot" and rest == "last":
        state.boot = dict(value)
    elif family == "tiered" and isinstance(value, dict):
        state.relocated[str(value["from"])] = str(value["to"])
    elif family == "slurm" and rest and isinstance(value, dict):
        state.slurm_nodes[rest] = dict(value)
    elif family == "kube" and rest and isinstance(value, dict):
        state.kube_nodes[rest] = dict(value)
    elif family == "training" and rest.startswith("resume:"):
        pass  # read by the training model (apps/simulator/training_faults), not part of the node's state
    elif key == "power:state":
        state.powered_off = not bool((value or {}).get("on", True))
    elif family == "sel" and rest.isdigit():
        pass  # the BMC's event log, read by the simulated BMC (apps/simulator/sel.py)
    else:
        return False
    return True


def apply_changes(state: SimulatedNode, changes: Iterable) -> SimulatedNode:
    """Apply stored changes (anything with key and value) in key order; those naming what is gone are skipped."""
    for change in sorted(changes, key=lambda change: change.key):
        apply_change(state, change.key, change.value)
    return state
