"""The BMC's event log (SEL) as a health-event producer: reading it over IPMI (`ipmitool sel elist`) or Redfish (the
System's SEL LogService Entries), which records matter, and recording each one once.

A per-BMC high-water mark (`Bmc.sel_mark`: the newest record's id and time) means a record becomes a health event
once: the next read takes only the records after it. A SEL cleared or wrapped since (its newest id is below the
mark, or the marked record's time changed) is read by time instead. The first read of a BMC takes the records of the
last FIRST_READ_HOURS only: an uncorrectable ECC from last year is history, not what is wrong now.

Records become events with source `bmc_log` on the node (memory, PCIe, processor, temperature, watchdog, OS
critical stop), on its BMC (a power supply) or, for a record on a GPU's sensor (its HBM ECC, its temperature, its
bus), on the GPU the record names (its index through bmc/gpu_names.py; the node where the inventory has no GPU
there); the evidence cites the SEL line. Informational
records (log cleared, boot, clock sync, power off/on) and deasserted ones make none."""

import asyncio
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.utils import timezone

from apps.core.outbound import OutboundRefused, check_target
from apps.health.choices import Severity, Source
from apps.health.services import Component, record_event
from apps.inventory.models import Gpu, Node
from apps.monitoring.bmc.clients import (
    PROBE,
    BmcFailure,
    IpmiRun,
    RedfishReader,
    RedfishSend,
    _command_block,
    _ipmi_failure,
)
from apps.monitoring.bmc.gpu_names import gpu_index, with_gpu_index
from apps.monitoring.bmc.logins import BmcLogin
from apps.monitoring.choices import BmcProtocol, PollResult
from apps.monitoring.models import Bmc
from apps.parsers.errors import ParseError
from apps.parsers.ipmi import parse_sel_elist
from apps.parsers.redfish import parse_log_entries

FIRST_READ_HOURS = 24
MAX_PAGES = 20  # of a Redfish Entries collection (Members@odata.nextLink); a SEL holds a few thousand records
LOG_SERVICE_IDS = ("SEL", "Sel", "Log1", "EventLog", "IPMI")  # what BMCs call the SEL's LogService
REDFISH_SENSOR_TYPES = {"Power Supply / Converter": "Power Supply"}


@dataclass(frozen=True)
class SelRecord:
    """One record, whichever protocol read it."""

    record_id: int | None
    timestamp: str | None  # ISO 8601; IPMI's carries no zone (read as UTC)
    sensor_type: str
    sensor: str  # the sensor's name where the protocol gives it apart ('GPU3 HBM', '#0x08'), else ''
    event: str
    asserted: bool
    line: str  # as the BMC gave it: ipmitool's line, or Redfish's Id, Created, Severity and Message


@dataclass
class SelOutcome:
    result: str  # PollResult: ok, auth_failed, unreachable, error
    message: str
    records: list[SelRecord] = field(default_factory=list)
    transcript: str = ""


@dataclass(frozen=True)
class Finding:
    kind: str
    severity: str
    on_bmc: bool  # on the node's BMC component (its power supplies), else on the node
    what: str


# (sensor type, pattern on the event text, finding); the first match wins. Only asserted records are judged.
RULES = (
    ("Memory", r"uncorrectable", Finding("bmc_memory_ecc", Severity.CRITICAL, False, "uncorrectable memory ECC")),
    (
        "Power Supply",
        r"failure|ac lost|input lost|power supply fault",
        Finding("bmc_psu_failure", Severity.MAJOR, True, "power supply failure"),
    ),
    (
        "Temperature",
        r"upper critical|non-recoverable|critical going high",
        Finding("bmc_temperature_critical", Severity.CRITICAL, False, "temperature past its critical threshold"),
    ),
    (
        "Critical Interrupt",
        r"fatal|uncorrectable|serr|perr",
        Finding("bmc_pcie_fatal", Severity.CRITICAL, False, "PCIe / bus fatal error"),
    ),
    (
        "Processor",
        r"ierr|thermal trip|machine check|uncorrectable",
        Finding("bmc_processor_error", Severity.CRITICAL, False, "processor error (IERR, thermal trip, MCE)"),
    ),
    (
        "Watchdog",
        r"hard reset|power down|power cycle|timer expired|timer interrupt",
        Finding("bmc_watchdog", Severity.MAJOR, False, "the host's watchdog fired"),
    ),
    (
        "OS Critical Stop",
        r"critical stop|os stop|graceful stop",
        Finding("bmc_os_critical_stop", Severity.MAJOR, False, "the OS stopped (kernel panic)"),
    ),
)


# A memory record on a GPU's sensor ('GPU3 HBM') is the GPU's HBM, not a DIMM: the GPU's repair answers for it.
GPU_MEMORY_SENSOR = re.compile(r"\bGPU\d*\b|\bHBM\b", re.IGNORECASE)
GPU_MEMORY_ECC = Finding("bmc_gpu_memory_ecc", Severity.CRITICAL, False, "uncorrectable GPU memory (HBM) ECC")


def classify(record: SelRecord) -> Finding | None:
    if not record.asserted:
        return None
    for sensor_type, pattern, finding in RULES:
        if record.sensor_type.startswith(sensor_type) and re.search(pattern, record.event, re.IGNORECASE):
            if finding.kind == "bmc_memory_ecc" and GPU_MEMORY_SENSOR.search(record.sensor or record.line):
                return GPU_MEMORY_ECC
            return finding
    return None


# --- reading --------------------------------------------------------------------------------------------------------


async def read_ipmi_sel(login: BmcLogin, run: IpmiRun) -> SelOutcome:
    code, stdout, stderr = await run(["sel", "elist"])
    transcript = _command_block("sel elist", code, stdout, stderr)
    if code != 0:
        if "unable to establish" in (stderr + stdout).lower():
            _, probe_out, probe_err = await run(PROBE)
            stderr = probe_err + probe_out + stderr
        raise _ipmi_failure(login, stderr or stdout)
    try:
        # ipmitool 1.8.19 prints nothing for an empty SEL (as against ipmi_sim); older ones 'SEL has no entries'
        entries = parse_sel_elist(stdout).entries if stdout.strip() else []
    except ParseError as error:
        raise BmcFailure(PollResult.ERROR, f"{login.name}: unreadable sel elist output ({error})") from None
    records = [
        SelRecord(e.record_id, e.timestamp, e.sensor_type, e.sensor, e.event, e.direction != "Deasserted", e.line)
        for e in entries
    ]
    return SelOutcome(PollResult.OK, f"{len(records)} SEL records", records, transcript)


async def read_redfish_sel(login: BmcLogin, send: RedfishSend) -> SelOutcome:
    reader = RedfishReader(login, send)
    root = await reader.get("/redfish/v1/", record=False)
    await reader.log_in(root)
    try:
        system = await reader.get(await reader.system_path(root), record=False)
        services_link = (system.get("LogServices") or {}).get("@odata.id")
        if not services_link:
            return SelOutcome(PollResult.OK, "the system has no LogServices: no event log read", [], "")
        services = (await reader.get(services_link, record=False)).get("Members") or []
        links = [m.get("@odata.id") for m in services if isinstance(m, dict) and m.get("@odata.id")]
        chosen = next((link for name in LOG_SERVICE_IDS for link in links if link.rstrip("/").endswith("/" + name)), "")
        if not chosen:
            return SelOutcome(PollResult.OK, "the system lists no SEL LogService: no event log read", [], "")
        service = await reader.get(chosen, record=False)
        page = (service.get("Entries") or {}).get("@odata.id") or f"{chosen}/Entries"
        records: list[SelRecord] = []
        for _ in range(MAX_PAGES):
            document = await reader.get(page)
            try:
                log = parse_log_entries(json.dumps(document))
            except ParseError as error:
                raise BmcFailure(PollResult.ERROR, f"{login.name}: unreadable SEL entries ({error})") from None
            records += [_redfish_record(entry) for entry in log.entries]
            if not log.next_link:
                break
            page = log.next_link
    finally:
        await reader.log_out()
    return SelOutcome(PollResult.OK, f"{len(records)} SEL records", records, "\n".join(reader.transcript))


def _redfish_record(entry) -> SelRecord:
    sensor_type = entry.sensor_type or ""
    line = f"{entry.id} | {entry.created or '-'} | {entry.severity or '-'} | {entry.message}"
    return SelRecord(
        int(entry.id) if entry.id.isdigit() else None,
        entry.created,
        REDFISH_SENSOR_TYPES.get(sensor_type, sensor_type),
        "",
        entry.message,
        (entry.entry_code or "Assert") != "Deassert",
        line,
    )


async def read_sel(login: BmcLogin, *, ipmi: IpmiRun, redfish: RedfishSend) -> SelOutcome:
    """Read one BMC's SEL; every failure comes back as an outcome naming the BMC (never raises)."""
    try:
        if not login.address:
            raise BmcFailure(PollResult.ERROR, f"{login.hostname} has no BMC address in the inventory")
        try:
            await asyncio.to_thread(check_target, login.address)
        except OutboundRefused as error:
            raise BmcFailure(PollResult.ERROR, f"{login.name}: {error}") from None
        if login.protocol == BmcProtocol.REDFISH:
            return await read_redfish_sel(login, redfish)
        return await read_ipmi_sel(login, ipmi)
    except BmcFailure as failure:
        return SelOutcome(failure.result, failure.message)


# --- the high-water mark and recording ------------------------------------------------------------------------------


def _moment(timestamp: str | None) -> datetime | None:
    if not timestamp:
        return None
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)  # a SEL's clock carries no zone: read as UTC


def new_records(records: list[SelRecord], mark: dict, *, now: datetime) -> list[SelRecord]:
    """The records after the mark; with no mark, those of the last FIRST_READ_HOURS."""
    if not mark:
        since = now - timedelta(hours=FIRST_READ_HOURS)
        return [r for r in records if (m := _moment(r.timestamp)) is not None and m > since]
    marked_id, marked_at = mark.get("record_id"), _moment(mark.get("timestamp"))
    ids = [r.record_id for r in records if r.record_id is not None]
    marked = next((r for r in records if marked_id is not None and r.record_id == marked_id), None)
    same_log = marked_id is not None and ids and max(ids) >= marked_id
    if same_log and (marked is None or _moment(marked.timestamp) == marked_at):
        return [r for r in records if r.record_id is not None and r.record_id > marked_id]
    if marked_at is None:  # no id to go by and no time: a log that changed under us is read whole
        return list(records)
    return [r for r in records if (m := _moment(r.timestamp)) is not None and m > marked_at]


def mark_of(records: list[SelRecord], previous: dict) -> dict:
    if not records:
        return previous
    newest = max(records, key=lambda r: (r.record_id if r.record_id is not None else -1, r.timestamp or ""))
    return {"record_id": newest.record_id, "timestamp": newest.timestamp}


def record_sel(*, node_id: int, records: list[SelRecord], job=None, now: datetime | None = None) -> int:
    """Turn the records after this BMC's mark into health events and move the mark; returns how many events were
    recorded. The mark is read and moved under a row lock, so two reads of one BMC never record a record twice."""
    now = now or timezone.now()
    with transaction.atomic():
        bmc = Bmc.objects.select_for_update().select_related("node").get(node_id=node_id)
        fresh = new_records(records, bmc.sel_mark, now=now)
        recorded = 0
        for record in fresh:
            finding = classify(record)
            if finding is None:
                continue
            _record(bmc.node, record, finding, job=job, now=now)
            recorded += 1
        Bmc.objects.filter(pk=bmc.pk).update(sel_mark=mark_of(records, bmc.sel_mark), sel_read=now)
    return recorded


def _record(node: Node, record: SelRecord, finding: Finding, *, job, now: datetime) -> None:
    evidence = {"lines": [record.line], "sel_record": record.record_id, "bmc_time": record.timestamp}
    if job is not None:
        evidence["job"] = str(job.public_id)
    at = _moment(record.timestamp)
    # The SEL counts GPUs from 1: the summary says which GPU index its 'GPU4' is (bmc/gpu_names.py).
    said = f"{record.sensor_type} {record.sensor}".strip() + f": {record.event}"
    component = Component.bmc(node) if finding.on_bmc else node
    if (index := gpu_index(said)) is not None:
        evidence["gpu_index"] = index
        if not finding.on_bmc:  # a GPU's sensor (its HBM, temperature, bus): on that GPU (its health, its repair)
            component = Gpu.objects.filter(node=node, index=index).first() or component  # the node where none
    record_event(
        component=component,
        source=Source.BMC_LOG,
        kind=finding.kind,
        severity=finding.severity,
        summary=f"{node.hostname} BMC event log: {finding.what} ({with_gpu_index(said, source='SEL')})"[:300],
        evidence=evidence,
        at=at if at is not None and at <= now else now,
    )
