"""The kernel-log producer: each compute node's kernel log, read every 5 minutes by one `kernel-log` job over the
fleet (apps/monitoring/kinds/kernel_log.py), goes through the triage rules (apps/parsers/triage.py), and what they
find in the lines logged since the last read becomes health events (apps/health), source `kernel_log`:

- an Xid line → `xid<N>` on the GPU its PCI address names (the node where none is inventoried there), with the
  telemetry watch's severities; the driver's "fallen off the bus" banner without an Xid line → `xid79`; but an Xid 74
  (NVLink) on a tray of a rack-scale NVLink domain makes none: a switch tray down logs it on every GPU of the domain,
  and the NVLink watch (apps/monitoring/nvlink_watch.py), which reads every tray's links, names the part at fault;
- a PCIe AER error (`PCIe Bus Error: severity=…`) → `pcie_aer_uncorrected` (major) on the GPU, NIC or node its bus
  id names; corrected ones → `pcie_aer_corrected` (minor) only when a read finds AER_CORRECTED_MIN or more on one
  device (a lone corrected error is what the link layer is there to fix).

Only lines newer than the node's high-water mark (KernelLogMark: the newest time stamp the last read saw, read with
`dmesg --time-format iso`) make events, so a line is never counted twice; evidence cites the lines and their numbers
in the read's output. A fault that stops logging is not cleared here."""

import datetime as dt
import re

from django.db import transaction
from django.utils import timezone

from apps.core.text import noun
from apps.diagnosis.health_events import gpu_at, nic_at, pci_address
from apps.health import services as health
from apps.health.choices import Severity, Source
from apps.health.models import HealthEvent
from apps.inventory.choices import NodeRole, NodeStatus, PowerState
from apps.inventory.models import Node
from apps.jobs.choices import JOB_ACTIVE
from apps.jobs.models import Job
from apps.jobs.services import TargetSpec, create_job
from apps.monitoring.models import KernelLogMark
from apps.monitoring.watch import XID_SEVERITY
from apps.nodeexec.catalogue import Command, register_command
from apps.parsers.triage import Finding, triage
from apps.parsers.xid import xid_info

KIND = "kernel-log"
# The warnings and errors only (Xid, AER, the driver's banners): the boot's chatter stays on the node.
COMMAND = register_command(
    Command(
        "kernel-log",
        ("dmesg", "--time-format", "iso", "--level", "emerg,alert,crit,err,warn"),
        "The kernel log's warnings and errors, with wall-clock time stamps (Xid and PCIe AER lines).",
        root=True,  # kernel.dmesg_restrict keeps the log root's
    )
)
# --time-format iso's stamp, after --decode's facility and level where it is there ("kern  :warn  : ").
ISO_STAMP = re.compile(r"^(?:\w+ *:\w+ *: )?(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d),(\d{6})([+-]\d\d):?(\d\d) ")
AER_CORRECTED_MIN = 3
NVLINK_XID = 74
CITED_LINES = 10  # of one event's observation (the dashboard shows three)


def schedule_read() -> Job | None:
    """Start one `kernel-log` job over every compute node in service, unless one is still queued or running (a slow
    fleet never piles reads up). Called every 5 minutes (RACKPILOT_PERIODIC_TASKS). A node its BMC reads powered off
    is left out: it has no kernel to ask (a leak's trays powered off failed every read's steps)."""
    if Job.objects.filter(kind=KIND, status__in=JOB_ACTIVE).exists():
        return None
    nodes = Node.objects.filter(role=NodeRole.COMPUTE).exclude(status=NodeStatus.RETIRED)
    nodes = nodes.exclude(power_state=PowerState.OFF).order_by("hostname")
    targets = tuple(str(public_id) for public_id in nodes.values_list("public_id", flat=True))
    if not targets:
        return None
    return create_job(kind=KIND, targets=TargetSpec(nodes=targets), parameters={})


def line_times(text: str) -> list[dt.datetime | None]:
    """Each line's time stamp (index 0 is line 1), a line without one taking the stamp of the line before it (a
    message the kernel wrapped onto several lines)."""
    times: list[dt.datetime | None] = []
    last = None
    for line in text.split("\n"):
        if match := ISO_STAMP.match(line):
            day, micro, hours, minutes = match.groups()
            last = dt.datetime.fromisoformat(f"{day}.{micro}{hours}:{minutes}")
        times.append(last)
    return times


def record_kernel_log(*, node: Node, text: str, job: Job | None = None) -> list[HealthEvent]:
    """The health events of the node's kernel log lines newer than its mark; the mark moves to the newest line.
    Returns the events recorded or folded."""
    times = line_times(text)
    stamped = [moment for moment in times if moment is not None]
    with transaction.atomic():
        mark = KernelLogMark.objects.select_for_update().filter(node=node).first()
        since = mark.read_until if mark is not None else None
        new = {number for number, moment in enumerate(times, start=1) if moment and (since is None or moment > since)}
        events = _events(node, triage(text).findings, new, times, job) if new else []
        if stamped and (since is None or max(stamped) > since):
            KernelLogMark.objects.update_or_create(node=node, defaults={"read_until": max(stamped)})
    return events


def _events(node: Node, findings: list[Finding], new: set[int], times: list, job: Job | None) -> list[HealthEvent]:
    cited = {id(finding): [(n, text) for n, text in zip(finding.lines, finding.excerpt, strict=True) if n in new]
             for finding in findings}  # fmt: skip
    events = []
    fell_off = [pci_address(finding.gpu or "") for finding in findings if finding.xid == 79 and cited[id(finding)]]
    for finding in findings:
        lines = cited[id(finding)]
        if not lines:
            continue
        if finding.xid == NVLINK_XID and node.nvlink_domain_id is not None:
            continue  # the NVLink watch sees every tray's links and names the part: the switch tray, a tray, a GPU
        if finding.xid is not None:
            events.append(_xid(node, finding.xid, finding.gpu, lines, times, job))
        elif finding.problem == "gpu_fell_off_bus" and not _said(finding.gpu, fell_off):
            events.append(_xid(node, 79, finding.gpu, lines, times, job, banner=True))
        elif finding.problem == "pcie_aer":
            events += _aer(node, finding, lines, times, job)
    return events


def _said(address: str | None, fell_off: list) -> bool:
    """Whether an Xid 79 line of the read said it already: on the same GPU, or on any for a banner naming none."""
    if address is None:
        return bool(fell_off)
    wanted = pci_address(address)
    return any(found is not None and wanted is not None and found[:3] == wanted[:3] for found in fell_off)


def _xid(node, code, address, lines, times, job, *, banner=False) -> HealthEvent:
    info = xid_info(code)
    severity = XID_SEVERITY.get(info.category, Severity.MAJOR) if info else Severity.MAJOR
    gpu = gpu_at(node, address or "")
    what = f"XID {code}" + (f", {info.name}" if info else "")
    if banner:
        what = "the driver says the GPU has fallen off the bus (no Xid line)"
    where = f"GPU {gpu.index}" if gpu else (address or node.hostname)
    evidence = {"xid": code, **({"pci_bus_id": address} if address else {})}
    return _record(node, gpu or node, f"xid{code}", severity, f"{where}: {what}", evidence, lines, times, job)


def _aer(node, finding: Finding, lines, times, job) -> list[HealthEvent]:
    address = finding.gpu or finding.device or ""
    component = gpu_at(node, address) or nic_at(node, address) or node
    uncorrected = [line for line in lines if "severity=Uncorrected" in line[1]]
    corrected = [line for line in lines if "severity=Corrected" in line[1]]
    where = f"{_name(component)} ({address})" if component is not node else address
    evidence = {"pci_bus_id": address}
    if uncorrected:
        fatal = "fatal" if any("(Fatal)" in text for _, text in uncorrected) else "non-fatal"
        summary = f"{where}: {len(uncorrected)} uncorrected ({fatal}) PCIe {noun(len(uncorrected), 'error')}"
        evidence |= {"uncorrected": len(uncorrected)}
        return [_record(node, component, "pcie_aer_uncorrected", Severity.MAJOR, summary, evidence, lines, times, job)]
    if len(corrected) >= AER_CORRECTED_MIN:
        summary = f"{where}: {len(corrected)} corrected PCIe errors since the last read"
        evidence |= {"corrected": len(corrected)}
        return [_record(node, component, "pcie_aer_corrected", Severity.MINOR, summary, evidence, lines, times, job)]
    return []


def _name(component) -> str:
    return f"GPU {component.index}" if hasattr(component, "uuid") else getattr(component, "name", str(component))


def _record(node, component, kind, severity, summary, evidence, lines, times, job) -> HealthEvent:
    lines = lines[-CITED_LINES:]
    at = max((times[number - 1] for number, _ in lines if times[number - 1]), default=None) or timezone.now()
    return health.record_event(
        component=component,
        source=Source.KERNEL_LOG,
        kind=kind,
        severity=severity,
        summary=f"{node.hostname}: {summary}"[:300],
        evidence={
            **evidence,
            **({"job": str(job.public_id)} if job is not None else {}),
            "command": " ".join(COMMAND.argv),
            "lines": [text for _, text in lines],
            "line_numbers": [number for number, _ in lines],
        },
        at=at,
    )
