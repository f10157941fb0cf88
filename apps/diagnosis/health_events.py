"""A runbook's findings as health events (apps/health): evidence that shows a fault on a node's part (a link, its
MTU or flow control, error counters, an XID, CUDA or InfiniBand errors, a full disk, a throttled GPU) is an event on
that NIC, GPU or node, linked to the incident and the job that read it and citing its lines. Symptoms of a training
job (timeouts, lagging ranks, progress, placement) are the incident's, not a component's, and make no event; a
rehearsal's findings are practice on an injected fault and make none either. A fix the re-check verified (the cause's
checks clean, training moving) is the validation those events wait for: they are cleared with it."""

import re

from apps.diagnosis.choices import EvidenceVerdict
from apps.diagnosis.models import Evidence, Incident
from apps.health import services as health
from apps.health.choices import ClearedBy, Severity, Source
from apps.health.models import HealthEvent
from apps.inventory.models import Gpu, Nic, Node
from apps.jobs.models import Job

# Evidence topic → the event's kind ("xid" takes the XID's number).
KINDS = {
    "link": "link_degraded",
    "mtu": "mtu_mismatch",
    "pfc": "pfc_off",
    "ecn": "ecn_off",
    "counters": "link_errors",
    "ib": "ib_error",
    "cuda": "cuda_error",
    "disk": "disk_full",
    "throttle": "gpu_throttled",
    "xid": "xid",
}
CRITICAL_XIDS = {48, 79, 94, 95}  # uncorrectable ECC, fallen off the bus, contained / uncontained ECC


def record_faults(*, incident: Incident, job: Job | None, rows: list[Evidence]) -> list[HealthEvent]:
    if incident.rehearsal:
        return []
    return [
        _record(incident, job, row)
        for row in rows
        if row.verdict == EvidenceVerdict.FAULT and row.node_id and row.topic in KINDS
    ]


def clear_verified(*, incident: Incident, job: Job, outcome: str) -> list[HealthEvent]:
    """The open runbook events the incident recorded (an observation of theirs cites it), cleared by the re-check that
    verified its fix (`job`). Read in Python: SQLite has no JSON containment, and an incident's events are few."""
    incident_id = str(incident.public_id)
    events = [
        event
        for event in HealthEvent.objects.open().filter(node__in=incident.evidence.values("node"))
        if any(observation.get("incident") == incident_id for observation in event.evidence)
    ]
    validation = {"incident": incident_id, "job": str(job.public_id), "outcome": outcome}
    reason = f"The incident's fix was verified: {outcome}"
    return [
        health.clear_event(event=event, by=ClearedBy.VALIDATION, reason=reason, validation=validation)
        for event in events
    ]


PCI_ADDRESS = re.compile(r"(?:PCI:)?(?:(?P<domain>[0-9a-f]{4,8}):)?(?P<bus>[0-9a-f]{2}):(?P<device>[0-9a-f]{2})"
                         r"(?:\.(?P<function>[0-7]))?", re.IGNORECASE)  # fmt: skip


def pci_address(text: str) -> tuple[int, int, int, int | None] | None:
    """(domain, bus, device, function or None) of a PCI address however it is written: the kernel's
    "PCI:0000:9a:00" or "0000:9a:00.0", nvidia-smi's and the inventory's "00000000:9A:00.0"."""
    match = PCI_ADDRESS.fullmatch(text.strip())
    if match is None:
        return None
    function = match["function"]
    return int(match["domain"] or "0", 16), int(match["bus"], 16), int(match["device"], 16), function and int(function)


def gpu_at(node: Node, address: str) -> Gpu | None:
    """The node's GPU at a PCI address (its function left out: a GPU is one device)."""
    wanted = pci_address(address or "")
    if wanted is None:
        return None
    return next((gpu for gpu in node.gpus.all() if (pci_address(gpu.pci_bus_id) or ())[:3] == wanted[:3]), None)


def nic_at(node: Node, address: str) -> Nic | None:
    """The node's NIC (port) at a PCI address (its function too: a dual-port card's ports are functions .0 and .1)."""
    wanted = pci_address(address or "")
    if wanted is None:
        return None
    return next((nic for nic in node.nics.all() if pci_address(nic.pci_address) == wanted), None)


def _gpu(row: Evidence):
    """The GPU an XID names by its PCI address ("PCI:0000:9a:00" in the kernel log, "00000000:9A:00.0" inventoried)."""
    return gpu_at(row.node, row.subject)


def _record(incident: Incident, job: Job | None, row: Evidence) -> HealthEvent:
    kind, severity, component = KINDS[row.topic], Severity.MAJOR, row.node
    if row.topic == "xid":
        numbers = row.data.get("bad") or row.data.get("xids") or []
        number = 79 if "Xid 79" in row.summary else (numbers[0] if numbers else None)
        kind = f"xid{number}" if number is not None else "xid"
        severity = Severity.CRITICAL if number in CRITICAL_XIDS else Severity.MAJOR
        component = _gpu(row) or row.node
    elif row.subject:
        component = next((nic for nic in row.node.nics.all() if nic.name == row.subject), row.node)
    return health.record_event(
        component=component,
        source=Source.RUNBOOK,
        kind=kind,
        severity=severity,
        summary=f"{row.hostname}: {row.summary}"[:300],
        evidence={
            "incident": str(incident.public_id),
            **({"job": str(job.public_id)} if job is not None else {}),
            "command": row.command,
            "lines": row.excerpt.splitlines()[:4],
        },
        at=row.observed_at,
    )
