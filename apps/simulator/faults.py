"""What each fault kind does to a simulated node's state, and which targets and parameters each kind accepts."""

from collections.abc import Callable

from apps.inventory.choices import MTU_MAX, MTU_MIN
from apps.simulator.choices import FAULT_TARGETS, FaultKind, FaultTarget
from apps.simulator.state import SimulatedNode


class FaultError(ValueError):
    """A fault that cannot be applied to this node; `field` names what is wrong."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


# Parameters each kind takes, with their defaults and bounds: (default, minimum, maximum).
PARAMETERS: dict[str, dict[str, tuple[int, int, int]]] = {
    FaultKind.MTU: {"mtu": (1500, MTU_MIN, MTU_MAX)},
    FaultKind.NVLINK_DOWN: {"link": (17, 0, 17)},
    FaultKind.ECC: {"count": (1, 1, 65535)},
    FaultKind.THERMAL: {"temperature": (92, 80, 110)},
    FaultKind.PCIE_DOWNTRAINED: {"gen": (3, 1, 5), "width": (8, 1, 16)},
    FaultKind.STRAGGLER: {"sm_clock_mhz": (1095, 210, 1980)},
}


def default_target(state: SimulatedNode, kind: str) -> str:
    target = FAULT_TARGETS[FaultKind(kind)]
    if target == FaultTarget.GPU:
        return str(state.gpus[0].index) if state.gpus else ""
    if target == FaultTarget.NIC:
        return state.data_nics[0].name if state.data_nics else ""
    if target == FaultTarget.PRIORITY:
        priorities = sorted({p for nic in state.data_nics for p in nic.pfc_priorities})
        return str(priorities[0]) if priorities else "3"
    if target == FaultTarget.MOUNT:
        return "/checkpoints" if state.volume("/checkpoints") else "/"
    if target == FaultTarget.FILE:
        return state.checkpoints[-1].path if state.checkpoints else ""
    return ""


def check_fault(state: SimulatedNode, kind: str, target: str, parameters: dict) -> tuple[str, dict]:
    """The target (default filled in) and parameters (defaults filled in) of a fault this node can have."""
    if kind not in FaultKind.values:
        raise FaultError("kind", f"{kind!r} is not a fault kind; choose one of {', '.join(FaultKind.values)}.")
    target = (target or "").strip() or default_target(state, kind)
    _check_target(state, kind, target)
    return target, _check_parameters(kind, parameters or {})


def _check_target(state: SimulatedNode, kind: str, target: str) -> None:
    expected = FAULT_TARGETS[FaultKind(kind)]
    if expected == FaultTarget.GPU:
        if not target.isdigit() or state.gpu(int(target)) is None:
            indexes = ", ".join(str(gpu.index) for gpu in state.gpus) or "none"
            raise FaultError("target", f"{state.hostname} has no GPU {target!r} (GPU indexes: {indexes}).")
    elif expected == FaultTarget.NIC:
        nic = state.nic(target)
        if nic is None or not nic.is_data:
            names = ", ".join(nic.name for nic in state.data_nics) or "none"
            raise FaultError("target", f"{state.hostname} has no data NIC {target!r} (data NICs: {names}).")
    elif expected == FaultTarget.PRIORITY:
        if not (target.isdigit() and 0 <= int(target) <= 7):
            raise FaultError("target", f"a PFC priority is 0 to 7, not {target!r}.")
    elif expected == FaultTarget.MOUNT:
        if state.volume(target) is None:
            mounts = ", ".join(volume.mount_point for volume in state.volumes)
            raise FaultError("target", f"{state.hostname} mounts nothing at {target!r} (mounts: {mounts}).")
    elif expected == FaultTarget.FILE:
        if not any(checkpoint.path == target for checkpoint in state.checkpoints):
            raise FaultError("target", f"{state.hostname} has no checkpoint {target!r}.")
    elif target:
        raise FaultError("target", f"a {kind} fault applies to the whole node; leave the target empty.")


def _check_parameters(kind: str, parameters: dict) -> dict:
    if not isinstance(parameters, dict):
        raise FaultError("parameters", 'parameters are a JSON object, e.g. {"mtu": 1500}.')
    allowed = PARAMETERS.get(kind, {})
    unknown = set(parameters) - set(allowed)
    if unknown:
        takes = ", ".join(sorted(allowed)) or "no parameters"
        raise FaultError("parameters", f"a {kind} fault takes {takes}, not {', '.join(sorted(unknown))}.")
    checked = {}
    for name, (default, low, high) in allowed.items():
        value = parameters.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise FaultError("parameters", f"{name} must be a whole number from {low} to {high}, not {value!r}.")
        checked[name] = value
    return checked


# --- effects ----------------------------------------------------------------------------------------------------


def _mtu(state: SimulatedNode, target: str, parameters: dict) -> None:
    state.nic(target).mtu = parameters["mtu"]


def _pfc_off(state: SimulatedNode, target: str, parameters: dict) -> None:
    for nic in state.data_nics:
        nic.pfc_priorities = [p for p in nic.pfc_priorities if p != int(target)]


def _nvlink_down(state: SimulatedNode, target: str, parameters: dict) -> None:
    gpu = state.gpu(int(target))
    link = min(parameters["link"], gpu.facts.nvlinks - 1)
    if link not in gpu.nvlinks_down:
        gpu.nvlinks_down.append(link)


def _xid79(state: SimulatedNode, target: str, parameters: dict) -> None:
    state.gpu(int(target)).present = False


def _ecc(state: SimulatedNode, target: str, parameters: dict) -> None:
    gpu = state.gpu(int(target))
    gpu.ecc_uncorrectable += parameters["count"]
    gpu.remap_pending = True


def _thermal(state: SimulatedNode, target: str, parameters: dict) -> None:
    gpu = state.gpu(int(target))
    gpu.thermal_c = parameters["temperature"]


def _pcie_downtrained(state: SimulatedNode, target: str, parameters: dict) -> None:
    gpu = state.gpu(int(target))
    gpu.pcie_gen = min(parameters["gen"], gpu.pcie_gen_max)
    gpu.pcie_width = parameters["width"]


def _nic_down(state: SimulatedNode, target: str, parameters: dict) -> None:
    state.nic(target).link_up = False


def _disk_full(state: SimulatedNode, target: str, parameters: dict) -> None:
    state.volume(target).full = True


def _corrupt_checkpoint(state: SimulatedNode, target: str, parameters: dict) -> None:
    for checkpoint in state.checkpoints:
        if checkpoint.path == target:
            checkpoint.corrupt = True


def _straggler(state: SimulatedNode, target: str, parameters: dict) -> None:
    state.straggler = True
    for gpu in state.gpus:
        gpu.clock_cap_mhz = parameters["sm_clock_mhz"]


def _ptp_unsynced(state: SimulatedNode, target: str, parameters: dict) -> None:
    state.ptp_synchronised = False


EFFECTS: dict[str, Callable[[SimulatedNode, str, dict], None]] = {
    FaultKind.MTU: _mtu,
    FaultKind.PFC_OFF: _pfc_off,
    FaultKind.NVLINK_DOWN: _nvlink_down,
    FaultKind.XID79: _xid79,
    FaultKind.ECC: _ecc,
    FaultKind.THERMAL: _thermal,
    FaultKind.PCIE_DOWNTRAINED: _pcie_downtrained,
    FaultKind.NIC_DOWN: _nic_down,
    FaultKind.DISK_FULL: _disk_full,
    FaultKind.CORRUPT_CHECKPOINT: _corrupt_checkpoint,
    FaultKind.STRAGGLER: _straggler,
    FaultKind.PTP_UNSYNCED: _ptp_unsynced,
}


def apply_faults(state: SimulatedNode, faults) -> SimulatedNode:
    """Apply stored faults (anything with kind, target, parameters) in a fixed order; stale targets are skipped."""
    for fault in sorted(faults, key=lambda fault: (fault.kind, fault.target)):
        try:
            target, parameters = check_fault(state, fault.kind, fault.target, fault.parameters)
        except FaultError:
            continue  # the inventory changed under the fault (a NIC renamed); the fault no longer applies
        EFFECTS[fault.kind](state, target, parameters)
        state.faults.append((fault.kind, target))
    return state
