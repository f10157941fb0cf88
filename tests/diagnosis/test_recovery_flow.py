"""Runbook 3 end to end on the simulator: the job interrupted by a full checkpoint volume, the newest complete
checkpoint corrupt → space freed, resumed from the newest valid checkpoint (not the corrupt one), and advancing;
no valid checkpoint → nothing run; a viewer cannot approve; the automatic policy's retries are bounded; a failed job
opens its incident with the runbook its log calls for; a node with a lost GPU is replaced by a spare."""

import pytest
from django.db import transaction

from apps.diagnosis import services
from apps.diagnosis.choices import Cause, IncidentState, RemediationState
from apps.diagnosis.models import Incident
from apps.diagnosis.phases import Phase
from apps.inventory.models import Node
from apps.parsers.training_log import parse_training_log
from apps.simulator import services as sim
from apps.workloads.choices import RecoveryPolicy, TrainingState

pytestmark = pytest.mark.usefixtures("on_the_simulator")

CKPT = "/checkpoints/llm-pretrain"


def _run_phase(incident, run_shards, phase):
    job = incident.jobs.filter(parameters__phase=phase).order_by("-created").first()
    assert job is not None, f"no {phase} job was started"
    run_shards(job)
    incident.refresh_from_db()
    return job


def _interrupted(training_job, inject, *, corrupt=True):
    """Disk full an hour ago: the save at step 2400 failed part-way; the newest complete checkpoint (2200) corrupt."""
    inject("gpu001", "disk_full", "/checkpoints", minutes_ago=60)
    if corrupt:
        inject("gpu001", "corrupt_checkpoint", f"{CKPT}/step_0002200", minutes_ago=50)


def _diagnose(training_job, operator, run_shards):
    incident = services.open_incident(
        user=operator, training_job=training_job, transport="sim", runbook="training-interrupted"
    )
    services.start_runbook(incident=incident, user=operator)
    _run_phase(incident, run_shards, Phase.LOG)
    _run_phase(incident, run_shards, Phase.CHECKS)
    return incident


@pytest.mark.django_db(transaction=True)
def test_disk_full_frees_space_and_resumes_from_the_newest_valid_checkpoint(
    training_job, inject, age_changes, operator, run_shards, settings
):
    settings.RACKPILOT_DIAGNOSIS_VERIFY_WAIT_SECONDS = 0
    _interrupted(training_job, inject)
    incident = _diagnose(training_job, operator, run_shards)
    assert "No space left on device" in incident.symptom
    space = incident.evidence.get(topic="space", hostname="gpu001")
    assert space.verdict == "fault" and space.data["available"] == 0 and space.command == f"df -P -B1 {CKPT}"
    marker = incident.evidence.get(topic="marker", subject="step 2400")
    assert marker.verdict == "fault"  # the save that hit the full disk never wrote .metadata
    manifest = incident.evidence.get(topic="manifest", subject="step 2200")
    assert manifest.verdict == "fault" and "__0_0.distcp: FAILED" in manifest.excerpt
    load = incident.evidence.get(topic="load", subject="step 2200")
    assert "failed finding central directory" in load.summary
    assert incident.evidence.get(topic="load", subject="step 2000").verdict == "healthy"
    assert incident.cause == Cause.CHECKPOINT_DISK_FULL and incident.state == IncidentState.CONCLUDED
    remediation = incident.remediations.get()
    assert remediation.plan["resume_step"] == 2000
    assert remediation.state == RemediationState.PROPOSED  # manual policy: an operator approves
    shown = services.dry_run(remediation=remediation)
    removals = [line for line in shown if " rm -rf -- " in line]
    # keep 3: step 2000 (resume), 1800, 1600 stay; older ones and the unfinished 2400 go; the corrupt 2200 stays.
    gone = (200, 400, 600, 800, 1000, 1200, 1400, 2400)
    assert removals == [f"gpu001$ rm -rf -- {CKPT}/step_{step:07d}" for step in gone]
    assert shown.index(removals[-1]) < min(i for i, line in enumerate(shown) if "torchrun" in line)  # freed first
    assert sum("--ckpt-step 2000" in line for line in shown) == 4
    assert "--node-rank 0" in shown[len(removals)] and "--rdzv-endpoint gpu001:29500" in shown[len(removals)]
    assert remediation.artefact.count("torchrun") == 4

    services.approve_remediation(remediation=remediation, user=operator)
    _run_phase(incident, run_shards, Phase.FIX)
    node = Node.objects.get(hostname="gpu001")
    df = sim.run_command(node=node, argv=["df", "-P", "-B1", CKPT]).stdout.splitlines()
    assert len(df) == 2 and int(df[1].split()[3]) > 0  # space freed
    age_changes(10)
    _run_phase(incident, run_shards, Phase.VERIFY)
    remediation.refresh_from_db()
    assert remediation.state == RemediationState.VERIFIED, remediation.outcome
    assert incident.state == IncidentState.RESOLVED
    log = sim.run_command(node=node, argv=["cat", training_job.log_path]).stdout
    run = parse_training_log(log)
    assert run.resumed_from == 2000 and run.resumed_path == f"{CKPT}/step_0002000" and run.last_step > 2000
    training_job.refresh_from_db()
    assert training_job.state == TrainingState.RUNNING


@pytest.mark.django_db(transaction=True)
def test_no_valid_checkpoint_gives_a_clear_message_and_runs_nothing(training_job, inject, operator, run_shards):
    training_job.checkpoint_interval_steps = 5000  # no save finished before the disk filled
    training_job.save()
    inject("gpu001", "disk_full", "/checkpoints", minutes_ago=110)
    incident = _diagnose(training_job, operator, run_shards)
    assert incident.state == IncidentState.UNRESOLVED
    assert "No valid checkpoint to resume from" in incident.conclusion and "nothing was run" in incident.conclusion
    assert not incident.remediations.exists()
    assert not incident.jobs.filter(parameters__phase=Phase.FIX).exists()


@pytest.mark.django_db(transaction=True)
def test_a_viewer_cannot_approve_the_recovery(training_job, inject, operator, viewer, run_shards, client):
    _interrupted(training_job, inject)
    incident = _diagnose(training_job, operator, run_shards)
    remediation = incident.remediations.get()
    client.force_login(viewer)
    url = f"/api/incidents/{incident.public_id}/remediations/{remediation.public_id}/approve/"
    assert client.post(url).status_code == 403
    page = client.get(f"/diagnosis/incidents/{incident.public_id}/")
    assert page.status_code == 200 and "--ckpt-step 2000" in page.content.decode()
    remediation.refresh_from_db()
    assert remediation.state == RemediationState.PROPOSED and remediation.fix_job is None


@pytest.mark.django_db(transaction=True)
def test_automatic_policy_recovers_at_once_and_its_retries_are_bounded(
    training_job, inject, operator, run_shards, settings
):
    settings.RACKPILOT_DIAGNOSIS_VERIFY_WAIT_SECONDS = 0
    training_job.recovery_policy, training_job.recovery_max_retries = RecoveryPolicy.AUTOMATIC, 2
    training_job.save()
    _interrupted(training_job, inject)
    incident = _diagnose(training_job, operator, run_shards)
    for attempt in (1, 2):
        remediation = incident.remediations.order_by("-created").first()
        assert remediation.plan["automatic"], (attempt, remediation.plan, remediation.state)
        assert remediation.approved_by is None and remediation.approved_at
        _run_phase(incident, run_shards, Phase.FIX)
        # Not aged: the relaunch is seconds old, the log shows no steps yet -> ineffective, and it retries.
        _run_phase(incident, run_shards, Phase.VERIFY)
        remediation.refresh_from_db()
        assert remediation.state == RemediationState.INEFFECTIVE
        if attempt == 1:
            _run_phase(incident, run_shards, Phase.LOG)
            _run_phase(incident, run_shards, Phase.CHECKS)
    assert incident.remediations.count() == 2
    assert incident.state == IncidentState.UNRESOLVED  # the retries are used: no third automatic run
    assert incident.jobs.filter(parameters__phase=Phase.LOG).count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_failed_job_opens_its_incident_with_runbook_3_for_a_full_disk(training_job, inject, run_shards):
    _interrupted(training_job, inject, corrupt=False)
    with transaction.atomic():
        training_job.state = TrainingState.FAILED
        training_job.save()
    incident = Incident.objects.get(training_job=training_job)
    assert incident.runbook == "training-interrupted" and incident.opened_by is None
    _run_phase(incident, run_shards, Phase.LOG)
    assert incident.runbook == "training-interrupted"
    assert incident.jobs.filter(parameters__phase=Phase.CHECKS).exists()
    training_job.save()  # saving it again (still failed) opens nothing more
    assert Incident.objects.filter(training_job=training_job).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_failed_job_that_only_timed_out_is_handed_to_runbook_1(training_job, inject, run_shards):
    inject("gpu003", "pfc_off", "3")
    with transaction.atomic():
        training_job.state = TrainingState.FAILED
        training_job.save()
    incident = Incident.objects.get(training_job=training_job)
    _run_phase(incident, run_shards, Phase.LOG)
    assert incident.runbook == "nccl-timeout"
    handed = incident.jobs.filter(kind="nccl-timeout", parameters__phase=Phase.LOG)
    assert handed.count() == 1
    assert not incident.hypotheses.filter(cause=Cause.WORKER_CRASH).exists()


@pytest.mark.django_db(transaction=True)
def test_a_lost_gpu_node_is_replaced_by_a_spare_of_its_sku(
    training_job, inject, age_changes, operator, run_shards, settings
):
    settings.RACKPILOT_DIAGNOSIS_VERIFY_WAIT_SECONDS = 0
    inject("gpu002", "xid79", "3", minutes_ago=40)
    incident = _diagnose(training_job, operator, run_shards)
    assert incident.cause == Cause.BAD_NODE
    assert list(incident.suspect_nodes.values_list("hostname", flat=True)) == ["gpu002"]
    remediation = incident.remediations.get()
    spare = remediation.plan["replaced"]["gpu002"]
    assert spare not in ("gpu001", "gpu003", "gpu004")
    assert Node.objects.get(hostname=spare).gpu_sku_id == Node.objects.get(hostname="gpu002").gpu_sku_id
    assert remediation.plan["hosts"] == ["gpu001", spare, "gpu003", "gpu004"]
    services.approve_remediation(remediation=remediation, user=operator)
    _run_phase(incident, run_shards, Phase.FIX)
    training_job.refresh_from_db()
    members = [m.node.hostname for m in training_job.members.select_related("node").order_by("node_rank")]
    assert members == ["gpu001", spare, "gpu003", "gpu004"]
    assert training_job.placements[0]["hosts"] == ["gpu001", "gpu002", "gpu003", "gpu004"]
    age_changes(10)
    _run_phase(incident, run_shards, Phase.VERIFY)
    remediation.refresh_from_db()
    assert remediation.state == RemediationState.VERIFIED, remediation.outcome
    log = sim.run_command(node=Node.objects.get(hostname=spare), argv=["cat", training_job.log_path]).stdout
    assert "Starting worker group" in log and "CUDA error" not in log.split("Starting worker group")[-1]
