"""The fault-injection interface: what a feature that rehearses against the simulator on purpose may use (the
diagnosis rehearsals, apps/diagnosis/rehearsal.py). Production code never imports the simulator; this module is the
one seam a rehearsal goes through (the contract in pyproject.toml lists it), so what rehearsals rely on is named here.
"""

from apps.simulator.choices import FaultKind
from apps.simulator.models import SimFault
from apps.simulator.services import backdate_fault
from apps.simulator.training import HANG_FAULTS
from apps.simulator.training_faults import JOB_FAULTS, SLOWING_FAULTS, loader_hangs, repaired_at

__all__ = [
    "FaultKind",
    "SimFault",
    "backdate_fault",
    "hangs_a_training_job",
    "hurts_a_training_job",
    "injected_faults",
    "repaired_at",
    "slows_a_training_job",
]


def injected_faults():
    """The faults injected now, with their nodes."""
    return SimFault.objects.select_related("node")


def hurts_a_training_job(kind: str) -> bool:
    """Whether a training job running where a fault of this kind is would notice it (so a runbook can be rehearsed
    on it)."""
    return kind in JOB_FAULTS


def hangs_a_training_job(fault: SimFault) -> bool:
    """Whether the fault hangs a job with only NCCL timeouts in its log (a network fault, a dead mount, a stalled
    data loader past the NCCL watchdog)."""
    return fault.kind in HANG_FAULTS or loader_hangs(fault)


def slows_a_training_job(fault: SimFault) -> bool:
    """Whether the fault only slows a job (a power cap, heat, held clocks, a starving loader, a second trainer)."""
    return fault.kind in SLOWING_FAULTS
