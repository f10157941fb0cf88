"""What a fault can apply to on a simulated node, each with its default and its check."""

import re

from apps.simulator.digits import is_whole_number
from apps.simulator.faults.spec import FaultError, Target
from apps.simulator.state import SimulatedNode


class GpuIndex(Target):
    label = "GPU index"

    def default(self, state: SimulatedNode) -> str:
        return str(state.gpus[0].index) if state.gpus else ""

    def check(self, state: SimulatedNode, kind: str, target: str) -> None:
        if not is_whole_number(target) or state.gpu(int(target)) is None:
            indexes = ", ".join(str(gpu.index) for gpu in state.gpus) or "none"
            raise FaultError("target", f"{state.hostname} has no GPU {target!r} (GPU indexes: {indexes}).")


class GpuOrWholeNode(GpuIndex):
    label = "GPU index, or empty for every GPU"

    def default(self, state: SimulatedNode) -> str:
        return ""

    def check(self, state: SimulatedNode, kind: str, target: str) -> None:
        if target:
            super().check(state, kind, target)


class DataNic(Target):
    label = "NIC name"

    def default(self, state: SimulatedNode) -> str:
        return state.data_nics[0].name if state.data_nics else ""

    def check(self, state: SimulatedNode, kind: str, target: str) -> None:
        nic = state.nic(target)
        if nic is None or not nic.is_data:
            names = ", ".join(nic.name for nic in state.data_nics) or "none"
            raise FaultError("target", f"{state.hostname} has no data NIC {target!r} (data NICs: {names}).")


class PfcPriority(Target):
    label = "PFC priority (0-7)"

    def default(self, state: SimulatedNode) -> str:
        priorities = sorted({priority for nic in state.data_nics for priority in nic.pfc_priorities})
        return str(priorities[0]) if priorities else "3"

    def check(self, state: SimulatedNode, kind: str, target: str) -> None:
        if not (is_whole_number(target) and 0 <= int(target) <= 7):
            raise FaultError("target", f"a PFC priority is 0 to 7, not {target!r}.")


class MountPoint(Target):
    label = "Mount point"

    def default(self, state: SimulatedNode) -> str:
        return "/checkpoints" if state.volume("/checkpoints") else "/"

    def check(self, state: SimulatedNode, kind: str, target: str) -> None:
        if state.volume(target) is None:
            mounts = ", ".join(volume.mount_point for volume in state.volumes)
            raise FaultError("target", f"{state.hostname} mounts nothing at {target!r} (mounts: {mounts}).")


class CheckpointFile(Target):
    label = "Checkpoint file"

    def default(self, state: SimulatedNode) -> str:
        return state.checkpoints[-1].path if state.checkpoints else ""

    def check(self, state: SimulatedNode, kind: str, target: str) -> None:
        if any(checkpoint.path == target for checkpoint in state.checkpoints) or self._run_file(state, target):
            return
        raise FaultError("target", f"{state.hostname} has no checkpoint {target!r}.")

    @staticmethod
    def _run_file(state: SimulatedNode, target: str) -> bool:
        """A checkpoint directory (or one of its shards) in the checkpoint directory of a simulated training run on
        this node. By its shape only: what the run has written depends on the faults, which are being applied."""
        from apps.simulator.training import runs_on  # the training model imports the faults: only when checking

        for run in runs_on(state.hostname):
            directory = re.escape(run.checkpoint_dir.rstrip("/"))
            if re.fullmatch(rf"{directory}/step_[0-9]{{7,9}}(/__[0-9]{{1,5}}_0\.distcp)?", target):
                return True
        return False


class WholeNode(Target):
    label = "The whole node"

    def check(self, state: SimulatedNode, kind: str, target: str) -> None:
        if target:
            raise FaultError("target", f"a {kind} fault applies to the whole node; leave the target empty.")


class SwitchTraySlot(Target):
    label = "NVLink switch tray slot"

    def default(self, state: SimulatedNode) -> str:
        return "1"

    def check(self, state: SimulatedNode, kind: str, target: str) -> None:
        domain = _domain_of(state, kind)
        if not is_whole_number(target) or not 1 <= int(target) <= domain.switch_trays:
            raise FaultError("target", f"{domain.name} has switch trays 1 to {domain.switch_trays}, not {target!r}.")


class ImexPeer(Target):
    label = "Compute tray hostname (default: this one)"

    def default(self, state: SimulatedNode) -> str:
        return state.hostname

    def check(self, state: SimulatedNode, kind: str, target: str) -> None:
        domain = _domain_of(state, kind)
        names = [peer.hostname for peer in domain.imex_peers]
        if target not in names:
            raise FaultError("target", f"{target!r} is not in {domain.name}'s IMEX domain ({len(names)} trays).")


class ComputeTray(WholeNode):
    label = "The whole compute tray"

    def check(self, state: SimulatedNode, kind: str, target: str) -> None:
        _domain_of(state, kind)
        super().check(state, kind, target)


class LeakingTray(Target):
    label = "Empty for this compute tray, or an NVLink switch tray slot of its domain"

    def check(self, state: SimulatedNode, kind: str, target: str) -> None:
        _domain_of(state, kind)
        if target:
            SWITCH_TRAY.check(state, kind, target)


def _domain_of(state: SimulatedNode, kind: str):
    if state.domain is None:
        message = f"a {kind} fault needs a compute tray of a rack-scale domain; {state.hostname} is not one."
        raise FaultError("kind", message)
    return state.domain


GPU = GpuIndex()
GPU_OR_NODE = GpuOrWholeNode()
NIC = DataNic()
PRIORITY = PfcPriority()
MOUNT = MountPoint()
FILE = CheckpointFile()
NODE = WholeNode()
SWITCH_TRAY = SwitchTraySlot()
IMEX_PEER = ImexPeer()
TRAY = ComputeTray()
LEAKING_TRAY = LeakingTray()
