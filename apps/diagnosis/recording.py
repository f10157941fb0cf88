"""What the runbook's jobs write: evidence, the causes' scores and ranking (each change kept), the conclusion and the
proposed fix. Called from the kind's hooks (apps/diagnosis/kinds/nccl_timeout.py), never from a read.

Each new piece of evidence and each change of the ranking is also sent as an event of the runbook's job, so the
job's websocket (and every page following it) sees it arrive, and to the incident's own group (apps/diagnosis/live.py),
which the incident page follows.
"""

from datetime import datetime

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from apps.diagnosis import health_events, live, recovery, storage_checks, utilisation
from apps.diagnosis.choices import RUNBOOK_CAUSES, Cause, EvidenceVerdict, IncidentState, RemediationState
from apps.diagnosis.models import Evidence, Hypothesis, Incident, RankingChange, Remediation
from apps.diagnosis.runbook import (
    STRONG,
    NicFacts,
    NodeFacts,
    Observation,
    conclude,
    fix_for,
    network_clean,
    weights,
)
from apps.inventory.choices import NicPurpose
from apps.inventory.models import Nic, Node
from apps.jobs.choices import EventLevel
from apps.jobs.events import emit
from apps.jobs.models import Artifact, Job, JobStep

LOG_TOPICS = (
    "watchdog",
    "lag",
    "ib",
    "cuda",
    "disk",
    "progress",
    "checkpoint",
    "worker",
)  # what the training log shows; the rest are node checks
SUGGESTIONS = {
    Cause.PFC_OFF: "Enable PFC on the RDMA priority (mlnx_qos --pfc) on the NICs that lost it, then re-check.",
    Cause.MTU_MISMATCH: "Set the data NIC's MTU back to the plane's (ip link set dev NIC mtu 9000), then re-check.",
    Cause.LINK_DOWN: "Reseat or replace the cable named by the inventory and check the switch port's state.",
    Cause.GPU_LOST: "Drain the node, reset the GPU or power-cycle, and restart the job from its newest checkpoint.",
    Cause.STORAGE_OR_LOADER: "Check the checkpoint volume's free space and the data loader on the lagging ranks.",
    Cause.STORAGE_SLOW: "Bring the storage server (NFS / Lustre) the lagging ranks read back, or the network path "
    "to it; the ranks go on once their reads complete.",
    Cause.CHECKPOINT_DISK_FULL: "Free space on the checkpoint tier (the oldest checkpoints beyond the keep count), "
    "then resume from the newest valid checkpoint.",
    Cause.CHECKPOINT_CORRUPT: "Resume from the newest checkpoint that is whole and loads; check the storage that "
    "wrote the bad one.",
    Cause.BAD_NODE: "Leave the node with the failed GPU out (a spare of the same SKU in its place) and resume.",
    Cause.WORKER_CRASH: "Resume from the newest valid checkpoint; if it crashes again, read the root-cause rank's "
    "traceback.",
    Cause.GPU_POWER_CAPPED: "Put the GPU's power limit back to its default (nvidia-smi -i N -pl W), then re-sample.",
    Cause.GPU_THERMAL: "Fix the cooling (fans, airflow, inlet temperature) or the PSU's power brake of the node.",
    Cause.GPU_CLOCKS_CAPPED: "Reset the application clocks (nvidia-smi -rac) on the slow GPUs.",
    Cause.CO_LOCATED_TRAINER: "One trainer per node: pod anti-affinity on the hostname and the scheduler profile, "
    "regenerated for the job's nodes; reschedule the second trainer.",
    Cause.DATALOADER_STALL: "Feed the GPUs: more data-loader workers, pinned memory, a deeper prefetch.",
}
WEIGHERS = {"nccl-timeout": weights, "training-interrupted": recovery.weights, "gpu-utilisation": utilisation.weights}


def node_facts(nodes) -> dict[str, NodeFacts]:
    """What the checks compare against, per node: its data NICs as the inventory (the plane) says they should be."""
    nics = (
        Nic.objects.filter(node__in=nodes, purpose=NicPurpose.DATA)
        .select_related("node", "cable_as_a__b_switch", "cable_as_b__a_switch")
        .order_by("node__hostname", "name")
    )
    facts: dict[str, list[NicFacts]] = {node.hostname: [] for node in nodes}
    for nic in nics:
        priorities = nic.pfc_priorities or []
        facts[nic.node.hostname].append(
            NicFacts(
                name=nic.name,
                mtu=nic.mtu,
                rdma_device=nic.rdma_capable,
                pfc_priority=int(priorities[0]) if priorities else None,
                ecn=nic.ecn_enabled,
                cable=_cable(nic),
            )
        )
    ids = {node.hostname: node.pk for node in nodes}
    return {host: NodeFacts(host, ids[host], tuple(items)) for host, items in facts.items()}


def _cable(nic: Nic) -> str:
    cable = getattr(nic, "cable_as_a", None)
    if cable is not None and cable.b_switch_id:
        return f"cable {cable.label or cable.pk} to {cable.b_switch.name} port {cable.b_port}"
    cable = getattr(nic, "cable_as_b", None)
    if cable is not None and cable.a_switch_id:
        return f"cable {cable.label or cable.pk} to {cable.a_switch.name} port {cable.a_port}"
    return ""


def rank_map(incident: Incident) -> dict[int, tuple[str, int]]:
    """Global rank -> (host name, local GPU index), in torchrun's order."""
    if incident.training_job is None:
        return {}
    return {rank: (node.hostname, local) for rank, node, local in incident.training_job.rank_map()}


def _take_seq(incident: Incident, count: int) -> int:
    """The first of `count` timeline numbers (the row lock keeps them gapless across shards)."""
    Incident.objects.filter(pk=incident.pk).update(last_seq=F("last_seq") + count)
    return Incident.objects.values_list("last_seq", flat=True).get(pk=incident.pk) - count + 1


def record_observations(
    *,
    incident: Incident,
    job: Job | None,
    observations: list[Observation],
    artifacts: dict[str, Artifact],
    at: datetime | None = None,
) -> list[Evidence]:
    """Store what one shard's commands showed, re-score the causes, and keep the ranking if it changed. `job` None:
    what was there when the incident opened (the watch's laggards), read by no runbook job; `at`: when it was seen."""
    if not observations:
        return []
    nodes = {node.hostname: node for node in Node.objects.filter(hostname__in={o.hostname for o in observations})}
    with transaction.atomic():
        first = _take_seq(incident, len(observations))
        rows = Evidence.objects.bulk_create(
            [
                Evidence(
                    incident=incident,
                    seq=first + index,
                    node=nodes.get(seen.hostname),
                    hostname=seen.hostname,
                    command=seen.command[:500],
                    observed_at=at or timezone.now(),
                    topic=seen.check,
                    subject=seen.subject[:64],
                    verdict=seen.verdict,
                    summary=seen.summary[:300],
                    excerpt=seen.excerpt,
                    data=seen.data,
                    job=job,
                    artifact=artifacts.get(seen.hostname),
                )
                for index, seen in enumerate(observations)
            ]
        )
        rows = list(
            Evidence.objects.filter(incident=incident, seq__gte=first, seq__lt=first + len(rows)).select_related("node")
        )
        changed = _rescore(incident, rows)
        health_events.record_faults(incident=incident, job=job, rows=rows)  # what is wrong now (apps/health)
    for row in rows if job is not None else ():
        level = EventLevel.WARNING if row.verdict == EvidenceVerdict.FAULT else EventLevel.INFO
        emit(
            job,
            f"evidence: {row.hostname} {row.topic} {row.subject}: {row.summary}".replace("  ", " "),
            level=level,
            hostname=row.hostname,
            data={"incident": str(incident.public_id), "evidence": evidence_json(row)},
        )
    if changed is not None and job is not None:
        emit(job, f"ranking: {changed.reason}", data={"incident": str(incident.public_id), "ranking": changed.ranking})
    live.push(incident, {"type": "evidence", "evidence": [evidence_json(row) for row in rows]})
    if changed is not None:
        live.push(incident, {"type": "ranking", "ranking": changed.ranking, "reason": changed.reason})
    return rows


def evidence_json(row: Evidence) -> dict:
    return {
        "seq": row.seq,
        "hostname": row.hostname,
        "topic": row.topic,
        "subject": row.subject,
        "verdict": row.verdict,
        "summary": row.summary,
        "command": row.command,
        "excerpt": row.excerpt,
        "observed_at": row.observed_at.isoformat(),
        "artifact": str(row.artifact.public_id) if row.artifact_id else None,
    }


def _rescore(incident: Incident, rows: list[Evidence]) -> RankingChange | None:
    hypotheses = {h.cause: h for h in incident.hypotheses.all()}
    weigh = WEIGHERS.get(incident.runbook, weights)
    for cause in RUNBOOK_CAUSES.get(incident.runbook, RUNBOOK_CAUSES["nccl-timeout"]):
        if cause not in hypotheses:
            hypotheses[cause] = Hypothesis.objects.create(incident=incident, cause=cause, suggestion=SUGGESTIONS[cause])
    before = [h.cause for h in sorted(hypotheses.values(), key=_order) if h.score > 0]
    # One check on one node counts once: a fault on any of its NICs, else its health (eight clean NICs do not
    # outweigh the one that lost PFC).
    groups: dict[tuple[str, str], list[Evidence]] = {}
    for row in rows:
        groups.setdefault((row.hostname, row.topic), []).append(row)
    for group in groups.values():
        faults = [row for row in group if row.verdict == EvidenceVerdict.FAULT]
        counted = faults or group
        seen = Observation(counted[0].topic, counted[0].subject, counted[0].verdict, "", "")
        for cause, points in weigh(seen).items():
            hypothesis = hypotheses.get(cause)
            if hypothesis is None:
                continue
            hypothesis.score += points
            (hypothesis.supporting if points > 0 else hypothesis.contradicting).add(*counted)
    ordered = sorted(hypotheses.values(), key=_order)
    for position, hypothesis in enumerate(ordered, start=1):
        hypothesis.rank = position
    Hypothesis.objects.bulk_update(ordered, ["score", "rank"])
    after = [h.cause for h in ordered if h.score > 0]
    if after == before:
        return None
    ranking = [{"cause": h.cause, "label": h.get_cause_display(), "score": h.score} for h in ordered]
    leader = ordered[0]
    reason = f"{leader.get_cause_display()} leads with {leader.score} after {', '.join(r.topic for r in rows)}"
    return RankingChange.objects.create(
        incident=incident, seq=_take_seq(incident, 1), ranking=ranking, reason=reason[:300]
    )


def _order(hypothesis: Hypothesis) -> tuple:
    return (-hypothesis.score, Cause.values.index(hypothesis.cause))


def scores(incident: Incident) -> dict[str, int]:
    return {h.cause: h.score for h in incident.hypotheses.all()}


def conclude_incident(*, incident: Incident, job: Job, storage: bool = False) -> Remediation | None:
    """After the node checks: name the cause, propose its fix, and escalate when the same fault came back. After
    the network checks no network cause standing out gives None (the storage / data-loader branch is next); after
    that branch's checks nothing standing out leaves the incident unresolved, saying what was checked."""
    observations = [observation(row) for row in incident.evidence.filter(job=job)]
    if not storage:
        cause = conclude(scores(incident))
        if not cause:
            clean = network_clean(observations)
            emit(
                job,
                ("The network checks ran clean" if clean else "No network cause stands out")
                + ": the storage / data-loader branch is next",
                data={"incident": str(incident.public_id)},
            )
            return None
        summary, commands = fix_for(cause, node_facts(list(incident.suspect_nodes.all())), observations)
    else:
        cause = storage_checks.conclude(scores(incident), STRONG)
        if not cause:
            incident.state = IncidentState.UNRESOLVED
            incident.conclusion = storage_checks.nothing_found(observations)
            incident.save(update_fields=["state", "conclusion", "updated"])
            emit(job, incident.conclusion, level=EventLevel.WARNING, data={"incident": str(incident.public_id)})
            return None
        summary, commands = storage_checks.fix_for(cause, observations)
    incident.cause, incident.state = cause, IncidentState.CONCLUDED
    incident.conclusion = summary
    incident.recurrence_of = _earlier_fix(incident, cause)
    incident.save(update_fields=["cause", "state", "conclusion", "recurrence_of", "updated"])
    remediation = Remediation.objects.create(
        incident=incident, cause=cause, summary=summary[:300], commands=[command.as_json() for command in commands]
    )
    message = f"conclusion: {Cause(cause).label}. Proposed fix: {summary}"
    if incident.recurrence_of:
        message += f" (escalated: the same fault was fixed in incident {incident.recurrence_of.public_id})"
    emit(
        job,
        message[:1000],
        level=EventLevel.WARNING,
        data={"incident": str(incident.public_id), "cause": cause, "remediation": str(remediation.public_id)},
    )
    return remediation


def observation(row: Evidence) -> Observation:
    return Observation(
        row.topic, row.subject, row.verdict, row.summary, row.command, row.excerpt, row.hostname, row.data
    )


def _earlier_fix(incident: Incident, cause: str) -> Incident | None:
    """A resolved incident with this cause on one of the same nodes: the fault came back after its fix."""
    return (
        Incident.objects.filter(
            state=IncidentState.RESOLVED, cause=cause, suspect_nodes__in=incident.suspect_nodes.all()
        )
        .exclude(pk=incident.pk)
        .order_by("-resolved_at")
        .first()
    )


def settle_verification(*, incident: Incident, remediation: Remediation, job: Job) -> None:
    """After the re-check: resolved only when the symptom is gone (the cause's checks clean and training moving)."""
    rows = list(incident.evidence.filter(job=job))
    faults = sorted(
        (row for row in rows if row.verdict == EvidenceVerdict.FAULT),
        key=lambda row: (row.topic in LOG_TOPICS, row.seq),
    )
    progress = [row for row in rows if row.topic == "progress" and row.verdict == EvidenceVerdict.HEALTHY]
    progressing = bool(progress)
    needs_progress = incident.training_job_id is not None
    gone = not faults and (progressing or not needs_progress)
    now = timezone.now()
    if gone:
        remediation.state = RemediationState.VERIFIED
        remediation.outcome = "Re-checked: no fault left" + (
            ", and training progresses again" + _resumed(progress) + "." if needs_progress else "."
        )
        incident.state, incident.resolved_at = IncidentState.RESOLVED, now
        incident.resolution = f"{remediation.summary}. {remediation.outcome}"
        health_events.clear_verified(incident=incident, job=job, outcome=remediation.outcome)
    else:
        remediation.state = RemediationState.INEFFECTIVE
        left = "; ".join(f"{row.hostname} {row.topic} {row.subject}: {row.summary}" for row in faults[:3])
        remediation.outcome = ("Still failing: " + left) if left else "Training has not resumed yet."
        incident.state = IncidentState.UNRESOLVED
    remediation.save(update_fields=["state", "outcome", "updated"])
    incident.save(update_fields=["state", "resolved_at", "resolution", "updated"])
    emit(
        job,
        f"re-check: {remediation.outcome}",
        level=EventLevel.INFO if gone else EventLevel.WARNING,
        data={"incident": str(incident.public_id), "resolved": gone},
    )


def _resumed(progress: list[Evidence]) -> str:
    """Where the restarted job took up again, as its log says (the checkpoint the last attempt loaded)."""
    steps = {row.data.get("resumed_from") for row in progress} - {None}
    return f", resumed from the checkpoint of step {min(steps)}" if steps else ""


def record_shard_observations(*, incident, job, shard, seen: dict, steps: tuple[str, ...]) -> None:
    """A finished shard's observations of the runbook's evidence steps, each with its raw output (the step's stdout)."""
    cells = JobStep.objects.filter(shard=shard)
    artifacts = {
        (artifact.step.hostname, artifact.step.step): artifact
        for artifact in Artifact.objects.filter(step__in=cells, stream="stdout").select_related("step")
    }
    for step in steps:
        observations = [o for (host, name), found in sorted(seen.items()) if name == step for o in found]
        record_observations(
            incident=incident,
            job=job,
            observations=observations,
            artifacts={host: artifact for (host, name), artifact in artifacts.items() if name == step},
        )
