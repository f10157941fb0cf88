"""The fault kinds, one entry each: adding a kind is a FaultKind member (apps/simulator/choices.py, a SimFault.kind
choice, so also a migration that only alters those choices; its effects on a training job there too) and its entry
here."""

from apps.inventory.choices import MTU_MAX, MTU_MIN
from apps.simulator.changes import nic_key
from apps.simulator.choices import FaultKind
from apps.simulator.faults.spec import FaultError, FaultSpec, Parameter
from apps.simulator.faults.targets import (
    FILE,
    GPU,
    GPU_OR_NODE,
    IMEX_PEER,
    LEAKING_TRAY,
    MOUNT,
    NIC,
    NODE,
    PRIORITY,
    SWITCH_TRAY,
    TRAY,
)
from apps.simulator.state import SimulatedNode


def _mtu(state: SimulatedNode, target: str, parameters: dict) -> None:
    state.nic(target).mtu = parameters["mtu"]


MTU = FaultSpec(
    value=FaultKind.MTU,
    colour="orange",
    target=NIC,
    parameters={"mtu": Parameter(1500, MTU_MIN, MTU_MAX)},
    apply=_mtu,
    fixed_by=lambda nic: nic_key(nic, "mtu"),  # ip link set dev NIC mtu 9000
    sentence=lambda nic, parameters: f"MTU {parameters['mtu']} on {nic}",
)


def _pfc_off(state: SimulatedNode, target: str, parameters: dict) -> None:
    for nic in state.data_nics:
        nic.pfc_priorities = [priority for priority in nic.pfc_priorities if priority != int(target)]


PFC_OFF = FaultSpec(
    value=FaultKind.PFC_OFF,
    colour="orange",
    target=PRIORITY,
    apply=_pfc_off,
    fixed_by=lambda priority: nic_key("*", "pfc"),  # mlnx_qos -i NIC --pfc ..., on any data NIC
    sentence=lambda priority, parameters: f"PFC off for priority {priority} on every data NIC",
)


def _nvlink_down(state: SimulatedNode, target: str, parameters: dict) -> None:
    gpu = state.gpu(int(target))
    link = min(parameters["link"], gpu.facts.nvlinks - 1)
    if link not in gpu.nvlinks_down:
        gpu.nvlinks_down.append(link)


NVLINK_DOWN = FaultSpec(
    value=FaultKind.NVLINK_DOWN,
    colour="orange",
    target=GPU,
    parameters={"link": Parameter(17, 0, 17)},
    apply=_nvlink_down,
    sentence=lambda gpu, parameters: f"NVLink {parameters['link']} down on GPU {gpu}",
)


def _xid79(state: SimulatedNode, target: str, parameters: dict) -> None:
    state.gpu(int(target)).present = False


XID79 = FaultSpec(
    value=FaultKind.XID79,
    colour="red",
    target=GPU,
    apply=_xid79,
    sentence=lambda gpu, parameters: f"GPU {gpu} has fallen off the bus (XID 79)",
)


def _ecc(state: SimulatedNode, target: str, parameters: dict) -> None:
    gpu = state.gpu(int(target))
    gpu.ecc_uncorrectable += parameters["count"]
    gpu.remap_pending = True


def _ecc_sentence(gpu: str, parameters: dict) -> str:
    count = parameters["count"]
    return f"{count} uncorrectable ECC error{'s' if count != 1 else ''} on GPU {gpu} (row remap pending)"


ECC = FaultSpec(
    value=FaultKind.ECC,
    colour="red",
    target=GPU,
    parameters={"count": Parameter(1, 1, 65535)},
    apply=_ecc,
    sentence=_ecc_sentence,
)


def _thermal(state: SimulatedNode, target: str, parameters: dict) -> None:
    state.gpu(int(target)).thermal_c = parameters["temperature"]


THERMAL = FaultSpec(
    value=FaultKind.THERMAL,
    colour="orange",
    target=GPU,
    parameters={"temperature": Parameter(92, 80, 110)},
    apply=_thermal,
    sentence=lambda gpu, parameters: f"GPU {gpu} slowed down by heat at {parameters['temperature']} °C",
)


def _late_thermal(state: SimulatedNode, target: str, parameters: dict) -> None:
    gpu = state.gpu(int(target))
    gpu.late_thermal_after_s = float(parameters["after_s"])
    gpu.late_thermal_c = parameters["temperature"]


# Idle or in a short test the GPU looks healthy; only a soak longer than `after_s` shows the slowdown.
LATE_THERMAL = FaultSpec(
    value=FaultKind.LATE_THERMAL,
    colour="orange",
    target=GPU,
    parameters={"after_s": Parameter(600, 1, 86400), "temperature": Parameter(92, 80, 110)},
    apply=_late_thermal,
    sentence=lambda gpu, parameters: (
        f"GPU {gpu} reaches {parameters['temperature']} °C and slows down after {parameters['after_s']} s under load"
    ),
)


def _pcie_downtrained(state: SimulatedNode, target: str, parameters: dict) -> None:
    gpu = state.gpu(int(target))
    gpu.pcie_gen = min(parameters["gen"], gpu.pcie_gen_max)
    gpu.pcie_width = parameters["width"]


PCIE_DOWNTRAINED = FaultSpec(
    value=FaultKind.PCIE_DOWNTRAINED,
    colour="orange",
    target=GPU,
    parameters={"gen": Parameter(3, 1, 5), "width": Parameter(8, 1, 16)},
    apply=_pcie_downtrained,
    sentence=lambda gpu, parameters: (
        f"PCIe link of GPU {gpu} downtrained to Gen{parameters['gen']} x{parameters['width']}"
    ),
)


def _nic_down(state: SimulatedNode, target: str, parameters: dict) -> None:
    state.nic(target).link_up = False


NIC_DOWN = FaultSpec(
    value=FaultKind.NIC_DOWN,
    colour="red",
    target=NIC,
    apply=_nic_down,
    sentence=lambda nic, parameters: f"{nic} link down",
)


def _disk_full(state: SimulatedNode, target: str, parameters: dict) -> None:
    state.volume(target).full = True


DISK_FULL = FaultSpec(
    value=FaultKind.DISK_FULL,
    colour="red",
    target=MOUNT,
    apply=_disk_full,
    sentence=lambda mount, parameters: f"disk full at {mount}",
)


def _corrupt_checkpoint(state: SimulatedNode, target: str, parameters: dict) -> None:
    for checkpoint in state.checkpoints:
        if checkpoint.path == target:
            checkpoint.corrupt = True


CORRUPT_CHECKPOINT = FaultSpec(
    value=FaultKind.CORRUPT_CHECKPOINT,
    colour="red",
    target=FILE,
    apply=_corrupt_checkpoint,
    sentence=lambda path, parameters: f"corrupt checkpoint {path}",
)


def _storage_slow(state: SimulatedNode, target: str, parameters: dict) -> None:
    state.volume(target).stalled = True


# The server behind a mount stops answering (an NFS server gone, a Lustre OST lost) or the local array hangs: the
# node's DataLoader workers block in D state on their reads, I/O pressure climbs to ~100 %, the kernel logs "nfs:
# server … not responding" / Lustre's lost connection and hung tasks, and the node's ranks stop reaching the next
# collective, so their peers' NCCL watchdog fires (apps/simulator/training.py).
STORAGE_SLOW = FaultSpec(
    value=FaultKind.STORAGE_SLOW,
    colour="red",
    target=MOUNT,
    apply=_storage_slow,
    sentence=lambda mount, parameters: f"the storage behind {mount} stopped answering",
)


def _straggler(state: SimulatedNode, target: str, parameters: dict) -> None:
    state.straggler = True
    for gpu in state.gpus:
        gpu.clock_cap_mhz = parameters["sm_clock_mhz"]


STRAGGLER = FaultSpec(
    value=FaultKind.STRAGGLER,
    colour="orange",
    target=NODE,
    parameters={"sm_clock_mhz": Parameter(1095, 210, 1980)},
    apply=_straggler,
    sentence=lambda _, parameters: f"a straggler: SM clocks capped at {parameters['sm_clock_mhz']} MHz",
)


def _power_cap(state: SimulatedNode, target: str, parameters: dict) -> None:
    for gpu in [state.gpu(int(target))] if target else state.gpus:
        gpu.power_limit_w = min(parameters["watts"], gpu.tdp_w)


# A power limit set below the default (a facility cap, a BMC power policy, a forgotten nvidia-smi -pl) on one GPU or
# all of them: under load the card holds the cap by lowering its SM clock, with the SW power cap reason set.
POWER_CAP = FaultSpec(
    value=FaultKind.POWER_CAP,
    colour="orange",
    target=GPU_OR_NODE,
    parameters={"watts": Parameter(450, 100, 1000)},
    apply=_power_cap,
    sentence=lambda gpu, parameters: (
        f"GPU {gpu} power-capped at {parameters['watts']} W"
        if gpu
        else f"every GPU power-capped at {parameters['watts']} W"
    ),
)


def _ptp_unsynced(state: SimulatedNode, target: str, parameters: dict) -> None:
    state.ptp_synchronised = False


PTP_UNSYNCED = FaultSpec(
    value=FaultKind.PTP_UNSYNCED,
    colour="orange",
    target=NODE,
    apply=_ptp_unsynced,
    sentence=lambda _, parameters: "PTP clock not synchronised",
)


def _degraded_cable(state: SimulatedNode, target: str, parameters: dict) -> None:
    nic = state.nic(target)
    if parameters["rate_gbps"]:
        nic.cable_speed_gbps = min(nic.effective_speed_gbps, parameters["rate_gbps"])
    nic.crc_errors_per_million = parameters["crc_per_million"]


def _degraded_cable_sentence(nic: str, parameters: dict) -> str:
    parts = [f"link up at {parameters['rate_gbps']} Gb/s"] if parameters["rate_gbps"] else []
    if parameters["crc_per_million"]:
        parts.append(f"{parameters['crc_per_million']} CRC errors per million frames")
    return f"degraded cable on {nic}: {' and '.join(parts) or 'no visible change'}"


# A cable that still links but at a lower rate (a lane down, a dirty connector), or that corrupts frames. The node
# alone looks healthy: NVLink carries a single-node test; only traffic across nodes crosses the cable.
DEGRADED_CABLE = FaultSpec(
    value=FaultKind.DEGRADED_CABLE,
    colour="orange",
    target=NIC,
    parameters={"rate_gbps": Parameter(200, 0, 800), "crc_per_million": Parameter(0, 0, 100000)},
    apply=_degraded_cable,
    sentence=_degraded_cable_sentence,
)


def _dataloader_stall(state: SimulatedNode, target: str, parameters: dict) -> None:
    state.dataloader_stall = (parameters["period_s"], parameters["stall_pct"])


def _dataloader_stall_sentence(_, parameters: dict) -> str:
    sentence = f"the data loader stalls the ranks {parameters['stall_pct']}% of every {parameters['period_s']} s"
    return sentence + (f", and once for {parameters['hang_s']} s" if parameters["hang_s"] else "")


# The input pipeline of the node's ranks cannot keep up (too few loader workers, no pinned memory, slow storage):
# every `period_s` the ranks wait `stall_pct` percent of it for a batch, and since every rank waits for the slowest
# at each all-reduce, every GPU of the job idles together: seen only in a training job's utilisation series. With
# `hang_s`, one stall (a worker stuck on a read, a deadlocked worker) holds the node's ranks that long from when the
# fault struck: past the NCCL watchdog, their peers time out (apps/simulator/training_faults.py).
DATALOADER_STALL = FaultSpec(
    value=FaultKind.DATALOADER_STALL,
    colour="orange",
    target=NODE,
    parameters={
        "period_s": Parameter(6, 2, 60),
        "stall_pct": Parameter(35, 10, 90),
        "hang_s": Parameter(0, 0, 86400),
    },
    apply=_dataloader_stall,
    sentence=_dataloader_stall_sentence,
)


CO_LOCATED_POD = "finetune-7b-worker-0"  # the other team's trainer, in the same namespace as the job's


def _co_located(state: SimulatedNode, target: str, parameters: dict) -> None:
    state.co_located_pod = CO_LOCATED_POD
    state.co_located_speed = parameters["speed_pct"] / 100


# A second trainer the scheduler placed on the node (no pod anti-affinity): it shares the node's CPUs, PCIe switches
# and NICs, so the job's ranks there run at `speed_pct` percent and every other rank waits for them. `kubectl get
# pods -o wide` shows both pods on the node.
CO_LOCATED = FaultSpec(
    value=FaultKind.CO_LOCATED,
    colour="orange",
    target=NODE,
    parameters={"speed_pct": Parameter(60, 10, 95)},
    apply=_co_located,
    sentence=lambda _, parameters: (
        f"a second trainer shares the node: the job's ranks run at {parameters['speed_pct']}% there"
    ),
)


def _links_down(state: SimulatedNode, links: list[int]) -> None:
    for gpu in state.gpus:
        gpu.nvlinks_down.extend(link for link in links if link < gpu.facts.nvlinks and link not in gpu.nvlinks_down)


def _nvswitch_tray_down(state: SimulatedNode, target: str, parameters: dict) -> None:
    state.domain.switch_trays_down.add(int(target))
    _links_down(state, state.domain.switch_tray_links(int(target)))


# A switch tray powered off or its NVSwitch chips fenced: every GPU of the domain loses the links that land on it
# (2 of 18 on NVL72), so `nvidia-smi nvlink -s` shows them inactive on every tray; the fabric runs at 8/9.
NVSWITCH_TRAY_DOWN = FaultSpec(
    value=FaultKind.NVSWITCH_TRAY_DOWN,
    colour="orange",
    target=SWITCH_TRAY,
    apply=_nvswitch_tray_down,
    sentence=lambda slot, parameters: f"NVLink switch tray {slot} down: every GPU of the domain lost its links to it",
    domain_wide=True,
)


def _tray_nvlink_degraded(state: SimulatedNode, target: str, parameters: dict) -> None:
    nvlinks = max((gpu.facts.nvlinks for gpu in state.gpus), default=0)
    _links_down(state, list(range(nvlinks - parameters["links"], nvlinks)))


# One compute tray's cable cartridge or connectors: its GPUs lose their last `links` links; the other trays are whole.
TRAY_NVLINK_DEGRADED = FaultSpec(
    value=FaultKind.TRAY_NVLINK_DEGRADED,
    colour="orange",
    target=TRAY,
    parameters={"links": Parameter(4, 1, 17)},
    apply=_tray_nvlink_degraded,
    sentence=lambda _, parameters: f"every GPU of the tray lost {parameters['links']} of its NVLink links",
)


def _imex_peer_lost(state: SimulatedNode, target: str, parameters: dict) -> None:
    state.domain.imex_lost.add(target)


# The IMEX daemon of one tray stopped or lost its peers: `nvidia-imex-ctl -N` on every tray shows it unavailable and
# the domain degraded, and memory exported over NVLink to or from it fails.
IMEX_PEER_LOST = FaultSpec(
    value=FaultKind.IMEX_PEER_LOST,
    colour="red",
    target=IMEX_PEER,
    apply=_imex_peer_lost,
    sentence=lambda peer, parameters: f"IMEX peer {peer} lost",
    domain_wide=True,
)


def _coolant_flow_low(state: SimulatedNode, target: str, parameters: dict) -> None:
    state.coolant_flow_pct = min(state.coolant_flow_pct, parameters["flow_pct"])


# The rack's loop delivers less than its design flow (a pump failing, a clogged filter, a valve half shut): every
# tray's BMC reads the low flow at its coolant inlet.
COOLANT_FLOW_LOW = FaultSpec(
    value=FaultKind.COOLANT_FLOW_LOW,
    colour="red",
    target=TRAY,
    parameters={"flow_pct": Parameter(40, 0, 99)},
    apply=_coolant_flow_low,
    sentence=lambda _, parameters: f"the rack's coolant flow at {parameters['flow_pct']}% of design",
    domain_wide=True,
)


def _leak(state: SimulatedNode, target: str, parameters: dict) -> None:
    if (
        not target
    ):  # a switch tray's leak is read by the switch tray's BMC (apps.simulator.services.switch_tray_leaking)
        state.leak_detected = True


# Coolant in the tray's drip tray: its leak detector reads Critical on its BMC. The target names an NVLink switch tray
# of the compute tray's domain by its slot where the leak is in that switch tray instead.
LEAK = FaultSpec(
    value=FaultKind.LEAK,
    colour="red",
    target=LEAKING_TRAY,
    apply=_leak,
    sentence=lambda slot, parameters: (
        f"coolant leak detected in NVLink switch tray {slot}" if slot else "coolant leak detected in the tray"
    ),
)


def _node_hang(state: SimulatedNode, target: str, parameters: dict) -> None:
    state.os_hung = True


# The kernel hung (a deadlock, a storm of soft lockups): nothing answers on the node's address, not even a refusal, so
# ssh times out connecting; its BMC still answers, its watchdog timer expired. Only a power cycle, a reset or an
# off-on through the BMC clears it (apps.simulator.services.bmc_power boots the node afresh).
NODE_HANG = FaultSpec(
    value=FaultKind.NODE_HANG,
    colour="red",
    target=NODE,
    apply=_node_hang,
    sentence=lambda _, parameters: "the OS hung: no answer over SSH, the BMC still answers",
)


# One entry per FaultKind, in its order (the page lists them so).
FAULT_KINDS: dict[str, FaultSpec] = {
    spec.value: spec
    for spec in (
        MTU,
        PFC_OFF,
        NVLINK_DOWN,
        XID79,
        ECC,
        THERMAL,
        PCIE_DOWNTRAINED,
        NIC_DOWN,
        DISK_FULL,
        CORRUPT_CHECKPOINT,
        STRAGGLER,
        PTP_UNSYNCED,
        DEGRADED_CABLE,
        LATE_THERMAL,
        POWER_CAP,
        DATALOADER_STALL,
        CO_LOCATED,
        STORAGE_SLOW,
        NVSWITCH_TRAY_DOWN,
        TRAY_NVLINK_DEGRADED,
        IMEX_PEER_LOST,
        COOLANT_FLOW_LOW,
        LEAK,
        NODE_HANG,
    )
}
CHOICES = FaultKind.choices


def fault_kind(value: str) -> FaultSpec:
    """The kind's entry; FaultError("kind", ...) for a value that is no kind."""
    try:
        return FAULT_KINDS[value]
    except (KeyError, TypeError):
        raise FaultError("kind", f"{value!r} is not a fault kind; choose one of {', '.join(FAULT_KINDS)}.") from None
