"""A node's faults: checking one before it is stored, and applying the stored ones to the node's state."""

from apps.simulator.faults.kinds import fault_kind
from apps.simulator.faults.spec import FaultError
from apps.simulator.state import SimulatedNode


def check_fault(state: SimulatedNode, kind: str, target: str, parameters: dict) -> tuple[str, dict]:
    """The target (default filled in) and parameters (defaults filled in) of a fault this node can have."""
    target = check_target(state, kind, target)
    return target, fault_kind(kind).check_parameters(parameters or {})


def check_target(state: SimulatedNode, kind: str, target: str) -> str:
    """The fault's target on this node, its default filled in; FaultError("target", ...) when the node has none such."""
    spec = fault_kind(kind)
    target = (target or "").strip() or spec.target.default(state)
    spec.target.check(state, kind, target)
    return target


def apply_faults(state: SimulatedNode, faults) -> SimulatedNode:
    """Apply stored faults (anything with kind, target, parameters) in a fixed order; stale targets are skipped."""
    for fault in sorted(faults, key=lambda fault: (fault.kind, fault.target)):
        try:
            target, parameters = check_fault(state, fault.kind, fault.target, fault.parameters)
        except FaultError:
            continue  # the inventory changed under the fault (a NIC renamed); the fault no longer applies
        fault_kind(fault.kind).apply(state, target, parameters)
        state.faults.append((fault.kind, target))
        if (struck := getattr(fault, "created", None)) is not None:  # a stored fault: when it struck
            state.fault_since[(fault.kind, target)] = struck.timestamp()
    if state.domain is not None:
        _apply_domain_faults(state)
    return state


def _apply_domain_faults(state: SimulatedNode) -> None:
    """What faults on the other trays of the tray's NVLink domain do to it (a switch tray down, an IMEX peer lost);
    their own tray lists them, this one only shows their effect."""
    for kind, target, parameters, struck in sorted(state.domain.shared_faults, key=lambda fault: fault[:2]):
        spec = fault_kind(kind)
        if not spec.domain_wide:
            continue
        try:
            target, parameters = check_fault(state, kind, target, parameters)
        except FaultError:
            continue
        spec.apply(state, target, parameters)
        state.fault_since.setdefault((kind, target), struck)  # its effects here date from then (the kernel log)
