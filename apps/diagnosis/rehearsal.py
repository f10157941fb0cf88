"""Rehearsals: a runbook started from the simulator page against a fault injected there, on a simulated training
job that the fault hurts (one already running on the node, or a demo job made for the rehearsal). The runbook is
the one a real incident would start with: the job's symptom decides (a hang, an interrupted job, a job running
slow).

A rehearsal is an incident like any other (the same phases, evidence, approval and re-check, over the `sim`
transport), marked `rehearsal` wherever it is listed. The run it diagnoses must already show the fault: a fault
injected a moment ago has not yet made any watchdog fire (NCCL's timeout is 10 minutes), so the rehearsal dates
the fault back to REHEARSAL_LEAD before now when it is younger, as if it struck while nobody was watching.

A demo job made for a rehearsal runs on the faulty node and idle peers only (never on another workload's nodes, whose
GPU-hours, telemetry and SLOs it would take over: a fault on a node that serves inference and runs no training job is
refused), and ends when its rehearsal is resolved. Clearing the fault on the simulator is how a fix "done by hand" is
made, so it leaves the job training: the re-check, or "Run the runbook again", then sees it resume and resolves.
"""

from datetime import timedelta

from django.db import transaction
from django.db.models.signals import post_save
from django.utils import timezone
from django.utils.text import slugify

from apps.core.audit import record
from apps.core.choices import AuditAction
from apps.core.text import echo
from apps.diagnosis import services
from apps.diagnosis.choices import INCIDENT_ACTIVE, IncidentState
from apps.diagnosis.models import Incident
from apps.diagnosis.phases import KIND, RECOVERY_KIND, UTILISATION_KIND
from apps.inventory.models import Node
from apps.simulator import injection
from apps.simulator.injection import FaultKind, SimFault
from apps.workloads.choices import Launcher, TrainingState
from apps.workloads.models import InferenceService, TrainingJob
from apps.workloads.services import set_training_nodes

REHEARSAL_LEAD = timedelta(minutes=15)  # past the NCCL watchdog's 10 minutes, and a checkpoint save or two
DEMO_HISTORY = timedelta(hours=2)  # how long the demo job has been training when the rehearsal starts
DEMO_NODES = 4  # the faulty node and peers of its SKU: the lagging ranks show against the others
DEMO_CHECKPOINT_INTERVAL = 200


def runbook_for(fault: SimFault) -> str:
    """The runbook a fault calls for: a network fault, a mount that stops answering or a data loader stall past the
    NCCL watchdog hangs the job with only NCCL timeouts in its log (runbook 1, whose storage branch takes the
    clean-network case); a lost GPU, a full checkpoint volume or a corrupt checkpoint interrupts it (runbook 3, which
    hands plain NCCL timeouts on to runbook 1); a power cap, heat, held clocks, a starving loader or a second
    trainer only slows it (runbook 2)."""
    if injection.hangs_a_training_job(fault):
        return KIND
    return UTILISATION_KIND if injection.slows_a_training_job(fault) else RECOVERY_KIND


def rehearsable_kinds() -> list[tuple[str, str]]:
    """The fault kinds a runbook can be rehearsed against (those that hurt a training job), as (value, label)."""
    return [(value, label) for value, label in FaultKind.choices if injection.hurts_a_training_job(value)]


def requested_fault(
    *, fault_id=None, node: str | None = "", kind: str | None = "", refused: set[str] | frozenset = frozenset()
) -> tuple[SimFault | None, dict[str, list[str]]]:
    """The injected fault a rehearsal is asked for (by its id, or the newest fault of a kind on a node) and every
    reason it cannot be rehearsed, by field (`fault`, `node`, `kind`), saving nothing. Fields in `refused` (refused
    by the door's shape) are given as None, not judged, though a node refused still counts as named."""
    if fault_id:
        fault = injection.injected_faults().filter(public_id=fault_id).first()
        if fault is None:
            return None, {"fault": [f"No injected fault {echo(str(fault_id))}: it may have been cleared."]}
        return fault, {"fault": problems} if (problems := refusals(fault)) else {}
    errors: dict[str, list[str]] = {}
    node_named = bool(node) or "node" in refused  # a node refused by its shape was named all the same
    if not node_named and "fault" not in refused:
        errors["fault"] = ["Name the fault, or the node and the fault's kind."]
    if node and not Node.objects.filter(hostname=node).exists():
        errors["node"] = [f"No node matches {echo(node)}."]
    if kind and kind not in FaultKind.values:
        errors["kind"] = [f"No fault kind is named {echo(kind)}."]
    elif kind and not injection.hurts_a_training_job(kind):
        errors["kind"] = [_harmless(kind)]
    elif not kind and "kind" not in refused and node_named:
        errors["kind"] = ["Name the fault's kind on that node."]
    if errors or refused or not (node and kind):
        return None, errors
    fault = injection.injected_faults().filter(node__hostname=node, kind=kind).order_by("-created", "-id").first()
    if fault is None:
        return None, {"kind": [f"No {echo(kind)} fault is injected on {echo(node)}."]}
    return fault, {"node": problems} if (problems := refusals(fault)) else {}


def refusals(fault: SimFault) -> list[str]:
    """Why no runbook can be rehearsed against this fault (empty when one can), saving nothing: it hurts no training
    job, a command has repaired it (the runbook would find nothing), or its node serves inference and runs no
    training job the fault hurts (a demo job would take its GPUs)."""
    if not injection.hurts_a_training_job(fault.kind):
        return [_harmless(fault.kind)]
    if repaired := injection.repaired_at(fault):
        return [
            f"A command repaired this fault at {repaired:%Y-%m-%d %H:%M} UTC (the simulator's changes made by "
            "commands): the node no longer shows it. Forget that change, or inject the fault again, to rehearse."
        ]
    if _job_hurt_by(fault) is None and (serving := _service_on(fault.node)):
        return [
            f"{fault.node.hostname} serves the inference service {serving} and runs no training job: a demo training "
            "job there would take over its GPUs. Rehearse on a node of a training job, or on an idle node."
        ]
    return []


def _harmless(kind: str) -> str:
    return (
        f"A {FaultKind(kind).label.lower()} fault does not hurt a training job: there is no runbook to rehearse "
        "against it."
    )


def rehearse(*, fault: SimFault, user) -> Incident:
    """Open a rehearsal incident for `fault` on a training job it hurts and start the fault's runbook on it.
    IncidentError (on `fault`) when none can be rehearsed against it (refusals), nothing made then."""
    if problems := refusals(fault):
        raise services.IncidentError(" ".join(problems), field="fault")
    with transaction.atomic():
        injection.backdate_fault(fault=fault, struck_at=timezone.now() - REHEARSAL_LEAD)
        running = _job_hurt_by(fault)
        job = running or _demo_job(fault)
        runbook = runbook_for(fault)
        incident = services.open_incident(
            user=user,
            training_job=job,
            title=f"Rehearsal: {fault.summary} ({job.name})",
            symptom=f"Rehearsal against the injected fault {fault.summary}.",
            transport="sim",
            runbook=runbook,
        )
        incident.rehearsal, incident.rehearsal_job_made = True, running is None
        incident.save(update_fields=["rehearsal", "rehearsal_job_made", "updated"])
        record(AuditAction.START, obj=incident, changes={"rehearsal": [None, fault.summary]})
        services.start_runbook(incident=incident, user=user, route=runbook == RECOVERY_KIND)
    return incident


def _job_hurt_by(fault: SimFault) -> TrainingJob | None:
    """A running simulated training job on the fault's node that the fault reaches (its checkpoints, for a storage
    fault)."""
    jobs = TrainingJob.objects.active().on(fault.node).exclude(log_path="").exclude(started_at=None).order_by("name")
    for job in jobs:
        if fault.kind == FaultKind.DISK_FULL and not _under(job.checkpoint_dir, fault.target):
            continue
        if fault.kind == FaultKind.CORRUPT_CHECKPOINT and not _under(fault.target, job.checkpoint_dir):
            continue
        return job
    return None


def _service_on(node: Node) -> str | None:
    """The name of an inference service active on the node, if any."""
    return InferenceService.objects.active().filter(nodes=node).values_list("name", flat=True).first()


def _under(path: str, directory: str) -> bool:
    directory = directory.rstrip("/")
    return bool(path and directory) and (path == directory or path.startswith(directory + "/"))


def _demo_job(fault: SimFault) -> TrainingJob:
    """A demo training job on the fault's node and peers of its SKU, two hours in, checkpointing where the fault
    reaches."""
    node = fault.node
    name = f"rehearsal-{slugify(node.hostname)}"[:100]
    job = TrainingJob.objects.filter(name=name).first()
    checkpoint_dir = _checkpoint_dir(fault, name)
    if job is None:
        job = TrainingJob(name=name, comments="A demo job for runbook rehearsals on the simulator.")
    job.ranks_per_node = node.expected_gpu_count or 8
    job.checkpoint_dir = checkpoint_dir
    job.checkpoint_interval_steps = DEMO_CHECKPOINT_INTERVAL
    job.log_path = f"/var/log/train/{name}.log"
    job.state = TrainingState.RUNNING
    job.started_at = min(timezone.now() - DEMO_HISTORY, fault.created - DEMO_HISTORY / 2)
    # The second trainer of a co_located fault is a scheduler's placement: the demo job is scheduled the same way.
    job.launcher = Launcher.KUBERNETES if fault.kind == FaultKind.CO_LOCATED else Launcher.TORCHRUN
    job.placements = []
    job.save()
    peers = (
        Node.objects.filter(gpu_sku=node.gpu_sku, role=node.role, drained_at=None)
        .exclude(pk=node.pk)
        .exclude(training_memberships__job__in=TrainingJob.objects.active().exclude(pk=job.pk))
        .exclude(inference_services__in=InferenceService.objects.active())
        .distinct()
        .order_by("hostname")[: DEMO_NODES - 1]
    )
    set_training_nodes(job=job, nodes=sorted([node, *peers], key=lambda member: member.hostname))
    return job


def _checkpoint_dir(fault: SimFault, name: str) -> str:
    if fault.kind == FaultKind.CORRUPT_CHECKPOINT:
        return fault.target.rstrip("/").rpartition("/")[0] or f"/checkpoints/{name}"
    if fault.kind == FaultKind.DISK_FULL:
        return f"{fault.target.rstrip('/')}/{name}"
    return f"/checkpoints/{name}"


def end_made_job(*, incident: Incident) -> bool:
    """End the demo job a rehearsal made, unless another active incident still works on it. Returns whether it
    ended."""
    job = incident.training_job
    if not incident.rehearsal_job_made or job is None or job.state != TrainingState.RUNNING:
        return False
    if job.incidents.filter(state__in=INCIDENT_ACTIVE).exclude(pk=incident.pk).exists():
        return False
    job.state = TrainingState.COMPLETED
    job.save(update_fields=["state", "updated"])
    return True


def _on_incident_saved(sender, instance: Incident, raw=False, **kwargs) -> None:
    if not raw and instance.state == IncidentState.RESOLVED:
        end_made_job(incident=instance)


def connect() -> None:
    post_save.connect(_on_incident_saved, sender=Incident, dispatch_uid="diagnosis-rehearsal-resolved")
