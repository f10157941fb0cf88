"""Log triage for the page, the API and ``manage.py triage``: bytes or text in, findings with advice out.

Triage only reads: nothing is stored. The rules are the parsers' (``apps.parsers.triage``); this module adds what
Rackpilot advises per problem (``choices.ADVICE``) and the checks on what users send (size, binary, empty).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from apps.core.audit import save_as
from apps.core.choices import AuditAction
from apps.core.text import counted
from apps.diagnosis import utilisation
from apps.diagnosis.choices import ADVICE, IncidentState, Problem, RemediationState
from apps.diagnosis.models import Incident
from apps.diagnosis.phases import RECOVERY_KIND, RUNBOOKS, UTILISATION_KIND, Phase, start_phase
from apps.nodeexec.catalogue import build, shell_join
from apps.parsers import logs
from apps.parsers import triage as rules
from apps.parsers.errors import ParseError
from apps.parsers.xid import xid_info

NOTHING_RECOGNISED = "No known problem in {lines} of {source}; nothing is guessed from an unrecognised log."


class TriageInputError(ValueError):
    """What was sent is not a log triage can read; ``field`` names the form or API field."""

    def __init__(self, message: str, *, field: str = "text"):
        super().__init__(message)
        self.message = message
        self.field = field


@dataclass
class TriageResult:
    source: str
    lines: int
    findings: list[dict[str, Any]] = field(default_factory=list)

    @property
    def recognised(self) -> bool:
        return bool(self.findings)

    @property
    def message(self) -> str:
        if self.findings:
            return f"{counted(len(self.findings), 'finding')} in {counted(self.lines, 'line')} of {self.source}."
        return NOTHING_RECOGNISED.format(lines=counted(self.lines, "line"), source=self.source)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "lines": self.lines,
            "recognised": self.recognised,
            "message": self.message,
            "findings": self.findings,
        }


def max_bytes() -> int:
    return settings.RACKPILOT_TRIAGE_MAX_BYTES


def decode_log(*, data: bytes, source: str, field: str = "file", limit: int | None = None) -> str:
    """The text of an uploaded or read log; TriageInputError naming ``source`` when it is over ``limit`` bytes,
    binary, or empty."""
    if limit is not None and len(data) > limit:
        raise TriageInputError(f"{source} is {len(data)} bytes, over the limit of {limit} bytes.", field=field)
    try:
        text = logs.decode_log(data)
    except ParseError:
        raise TriageInputError(f"{source} is binary data, not a text log.", field=field) from None
    return check_text(text=text, source=source, field=field)


def check_text(*, text: str, source: str, field: str = "text", limit: int | None = None) -> str:
    """Pasted text: TriageInputError when it is empty, over ``limit`` bytes (UTF-8) or holds NUL bytes."""
    if limit is not None and (size := len(text.encode("utf-8", errors="replace"))) > limit:
        raise TriageInputError(f"{source} is {size} bytes, over the limit of {limit} bytes.", field=field)
    if "\x00" in text:
        raise TriageInputError(f"{source} holds binary data (NUL bytes), not a text log.", field=field)
    if not text.strip():
        raise TriageInputError(f"{source} is empty: there is no log line to read.", field=field)
    return text


def read_submission(*, text: object, upload, limit: int) -> tuple[str, str]:
    """(source, log) from what the page or the API received: pasted ``text`` or an ``upload`` (a Django UploadedFile),
    one of the two. TriageInputError naming the field otherwise; an oversize upload is refused before it is read."""
    if upload is not None and isinstance(text, str) and text.strip():
        raise TriageInputError("Send either text or a file, not both.", field="file")
    if upload is not None:
        if upload.size > limit:
            raise TriageInputError(
                f"{upload.name} is {upload.size} bytes, over the limit of {limit} bytes.", field="file"
            )
        return upload.name, decode_log(data=upload.read(), source=upload.name, limit=limit)
    if not isinstance(text, str):
        raise TriageInputError("Send the log as text (a string) or as a file upload.", field="text")
    return "pasted log", check_text(text=text, source="The pasted log", limit=limit)


def triage_text(*, text: str, source: str) -> TriageResult:
    """The findings in one log, each with the advice for its problem."""
    report = rules.triage(text)
    return TriageResult(
        source=source, lines=report.lines, findings=[finding_dict(f, source=source) for f in report.findings]
    )


def finding_dict(finding: rules.Finding, *, source: str) -> dict[str, Any]:
    problem = Problem(finding.problem)
    advice = ADVICE[problem]
    info = xid_info(finding.xid) if finding.xid is not None else None
    return {
        "problem": problem.value,
        "label": problem.label,
        "source": source,
        "lines": finding.lines,
        "excerpt": finding.excerpt,
        "count": finding.count,
        "detail": finding.detail,
        "rank": finding.rank,
        "node": finding.node,
        "gpu": finding.gpu,
        "nic": finding.nic,
        "xid": finding.xid,
        "xid_name": info.name if info else None,
        "xid_meaning": info.meaning if info else None,
        "peer": finding.peer,
        "device": finding.device,
        "explanation": advice.explanation,
        "runbook": advice.runbook,
        "next_step": info.action if info else advice.next_step,
    }


# --- incidents ---------------------------------------------------------------------------------------------------


class IncidentError(ValueError):
    """A request about an incident that cannot be done; ``field`` names what is wrong (the first field of
    ``errors``, which holds every bad field, by field, when several are)."""

    def __init__(self, message: str, *, field: str = "non_field_errors", errors: dict[str, list[str]] | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.errors = errors or {field: [message]}

    @classmethod
    def of(cls, errors: dict[str, list[str]]) -> IncidentError:
        message = " ".join(m for messages in errors.values() for m in messages)
        return cls(message, field=next(iter(errors)), errors=errors)


def incident_errors(
    *,
    runbook: str,
    training_job=None,
    node=None,
    check_step=None,
    sample_seconds: int | None = None,
    subject_refused: bool = False,
) -> dict[str, list[str]]:
    """What open_incident, and the runbook's start over `sample_seconds`, would refuse, by field, saving nothing:
    every bad field at once. `subject_refused`: the door refused the training job or node named (none such), so the
    incident was about something all the same."""
    errors: dict[str, list[str]] = {}
    if runbook not in RUNBOOKS:
        errors["runbook"] = [f"No runbook {runbook!r}; choose one of {', '.join(RUNBOOKS)}."]
    elif runbook in (RECOVERY_KIND, UTILISATION_KIND) and training_job is None:
        errors["training_job"] = [f"The {runbook} runbook needs the training job."]
    if training_job is None and node is None and check_step is None and not subject_refused:
        errors.setdefault("training_job", ["Name the training job, node or failed check the incident is about."])
    if training_job is not None and not training_job.log_path:
        errors["training_job"] = [f"{training_job} has no log path: the runbook reads the training log."]
    if sample_seconds is not None:
        try:
            check_sample_seconds(runbook=runbook, seconds=sample_seconds)
        except IncidentError as error:
            errors[error.field] = [error.message]
    return errors


def open_incident(
    *,
    user,
    training_job=None,
    node=None,
    check_step=None,
    title: str = "",
    symptom: str = "",
    transport: str = "",
    runbook: str = "nccl-timeout",
):
    """Open an incident about a training job, a node or a failed check (at least one of them). `runbook`:
    ``nccl-timeout`` (runbook 1), ``gpu-utilisation`` (runbook 2) or ``training-interrupted`` (runbook 3); the
    last two need the training job. IncidentError naming every bad field otherwise (incident_errors)."""
    errors = incident_errors(runbook=runbook, training_job=training_job, node=node, check_step=check_step)
    if errors:
        raise IncidentError.of(errors)
    subject = training_job or node or check_step
    label = {RECOVERY_KIND: "Training interrupted", UTILISATION_KIND: "GPU utilisation fluctuating"}.get(
        runbook, "NCCL timeout / hang"
    )
    incident = Incident.objects.create(
        runbook=runbook,
        title=(title or f"{label}: {subject}")[:200],
        symptom=symptom,
        training_job=training_job,
        node=node or (check_step.node if check_step is not None else None),
        check_step=check_step,
        opened_by=user,
        transport=transport,
    )
    if incident.node is not None and training_job is None:
        incident.suspect_nodes.add(incident.node)
    return incident


def check_sample_seconds(*, runbook: str, seconds: int) -> None:
    """Runbook 2's sampling window: within its bounds, and only for the runbook that samples."""
    if runbook != UTILISATION_KIND:
        raise IncidentError("Only runbook 2 (gpu-utilisation) samples the GPUs over a window.", field="sample_seconds")
    if not utilisation.MIN_WINDOW_S <= seconds <= utilisation.MAX_WINDOW_S:
        raise IncidentError(
            f"The sampling window is {utilisation.MIN_WINDOW_S}-{utilisation.MAX_WINDOW_S} s, not {seconds}.",
            field="sample_seconds",
        )


def start_runbook(
    *, incident, user, wait_seconds: int | None = None, route: bool = False, sample_seconds: int | None = None
):
    """Start the incident's runbook from its first phase: the training log, or the node's checks for an incident
    about a node (runbook 1), or the utilisation series (runbook 2, over `sample_seconds`: the job kind's bounds and
    default). `route` (runbook 3): hand over to runbook 1 if the log shows only NCCL timeouts."""
    if incident.state in (IncidentState.INVESTIGATING, IncidentState.FIXING, IncidentState.VERIFYING):
        raise IncidentError(f"The runbook is already running on this incident ({incident.get_state_display()}).")
    if sample_seconds is not None:
        check_sample_seconds(runbook=incident.runbook, seconds=sample_seconds)
    phase = Phase.LOG if incident.training_job_id else Phase.NETWORK
    if incident.runbook == UTILISATION_KIND:
        phase = Phase.SAMPLE
    return start_phase(
        incident=incident,
        phase=phase,
        user=user,
        wait_seconds=wait_seconds,
        route=route and phase == Phase.LOG,
        sample_seconds=sample_seconds if phase == Phase.SAMPLE else None,
    )


def dry_run(*, remediation) -> list[str]:
    """The fix as it would run: each exact command on its node, checked against the catalogue; nothing runs."""
    if not remediation.commands:
        return [f"(no command: a person does this) {remediation.summary}"]
    return [
        f"{command['hostname']}$ {shell_join(build(command['command'], **command['values']))}"
        for command in remediation.commands
    ]


def approve_remediation(*, remediation, user, wait_seconds: int | None = None, automatic: bool = False):
    """An operator approves the fix: it runs as a job (or, done by hand, is re-checked), then the runbook re-checks.
    `automatic`: the training job's recovery policy approves it (no user; audited as such)."""
    if remediation.state != RemediationState.PROPOSED:
        raise IncidentError(f"This fix is {remediation.get_state_display().lower()}, not waiting for approval.")
    lines = dry_run(remediation=remediation)  # a command the catalogue refuses fails here, before anything is approved
    remediation.state = RemediationState.APPROVED if remediation.commands else RemediationState.APPLIED
    remediation.approved_by, remediation.approved_at = user, timezone.now()
    commands = "; ".join(lines)
    save_as(  # one entry, "Approved", with what was approved (the request's actor, or the recovery policy)
        remediation,
        AuditAction.APPROVE,
        also={
            # approved by the recovery policy, not a person: the changes say so
            **({"policy": [None, "automatic"]} if automatic else {}),
            "summary": [None, remediation.summary],
            **({"commands": [None, commands]} if commands else {}),
        },
        user=None if automatic else user,
    )
    phase = Phase.FIX if remediation.commands else Phase.VERIFY
    return start_phase(
        incident=remediation.incident, phase=phase, remediation=remediation, user=user, wait_seconds=wait_seconds
    )


def node_history(node, request=None) -> dict:
    """The node page's incident history: every incident about it or that suspected it, newest first."""
    incidents = (
        Incident.objects.touching(node).select_related("training_job", "recurrence_of").order_by("-created")[:50]
    )
    return {"node": node, "incidents": list(incidents)}


def open_incidents_by_node(nodes) -> dict[int, list]:
    """node id -> the active incidents about each node, that suspect it or found evidence on it (newest first).
    Reads only: for the pages of other apps (monitoring's SLO blame), which never write incidents."""
    nodes = list(nodes)
    found: dict[int, list] = {node.pk: [] for node in nodes}
    if not nodes:
        return found
    query = Q(node__in=nodes) | Q(suspect_nodes__in=nodes) | Q(evidence__node__in=nodes)
    incidents = Incident.objects.active().filter(query).distinct().prefetch_related("suspect_nodes")
    for incident in incidents.order_by("-created"):
        touched = {incident.node_id} | {node.pk for node in incident.suspect_nodes.all()}
        touched |= set(incident.evidence.filter(node__in=nodes).values_list("node_id", flat=True))
        for node_id in touched & set(found):
            found[node_id].append(incident)
    return found
