"""Runbook 1 end to end on the simulator: each fault gives its branch, its conclusion and its fix."""

import pytest

from apps.core.choices import AuditAction
from apps.core.models import AuditEntry
from apps.diagnosis import services
from apps.diagnosis.choices import Cause, IncidentState, RemediationState
from apps.diagnosis.phases import Phase
from apps.health.models import HealthEvent
from apps.simulator import services as sim
from apps.simulator.training import STARTUP_SECONDS, TrainingRun


def _run_phase(incident, run_shards, phase):
    job = incident.jobs.filter(parameters__phase=phase).order_by("-created").first()
    assert job is not None, f"no {phase} job was started"
    run_shards(job)
    incident.refresh_from_db()
    return job


@pytest.mark.django_db(transaction=True)
def test_pfc_off_is_found_fixed_and_resolved(training_job, inject, age_changes, operator, run_shards, settings):
    settings.RACKPILOT_DIAGNOSIS_VERIFY_WAIT_SECONDS = 0
    inject("gpu003", "pfc_off", "3")
    incident = services.open_incident(user=operator, training_job=training_job, transport="sim")
    services.start_runbook(incident=incident, user=operator)
    _run_phase(incident, run_shards, Phase.LOG)
    assert list(incident.suspect_nodes.values_list("hostname", flat=True)) == ["gpu003"]
    assert "timed out in ALLREDUCE" in incident.symptom
    lag = incident.evidence.get(topic="lag")
    assert lag.data["ranks"] == list(range(16, 24)) and lag.data["hosts"] == ["gpu003"]
    assert "gpu003 GPUs 0-7" in lag.summary
    _run_phase(incident, run_shards, Phase.NETWORK)
    assert incident.state == IncidentState.CONCLUDED
    assert incident.cause == Cause.PFC_OFF
    recorded = HealthEvent.objects.open().filter(node__hostname="gpu003", kind="pfc_off")
    assert recorded.exists()
    remediation = incident.remediations.get()
    assert {c["command"] for c in remediation.commands} == {"set-qos"}
    assert {c["hostname"] for c in remediation.commands} == {"gpu003"}
    print(services.dry_run(remediation=remediation))
    services.approve_remediation(remediation=remediation, user=operator)
    _run_phase(incident, run_shards, Phase.FIX)
    age_changes(10)
    _run_phase(incident, run_shards, Phase.VERIFY)
    remediation.refresh_from_db()
    assert remediation.state == RemediationState.VERIFIED, remediation.outcome
    assert incident.state == IncidentState.RESOLVED
    # The elastic agent restarted the workers from the newest checkpoint saved before PFC went off (the model:
    # started 2 h ago, the fault 30 min ago, a step every 1.6 s after 45 s of start-up, a checkpoint every 200).
    last_good = int((90 * 60 - STARTUP_SECONDS) / TrainingRun.step_seconds) // 200 * 200
    assert f"resumed from the checkpoint of step {last_good}." in remediation.outcome
    progress = incident.evidence.get(topic="progress", verdict="healthy")
    assert progress.data["resumed_from"] == last_good
    # The verified fix is the validation the runbook's events waited for: gpu003 is healthy again, not left unhealthy
    # by an MTU/PFC event nobody would clear.
    assert not HealthEvent.objects.open().filter(source="runbook").exists()
    verify = incident.jobs.get(parameters__phase=Phase.VERIFY)
    for cleared in HealthEvent.objects.filter(node__hostname="gpu003", kind="pfc_off"):  # one a data NIC
        assert cleared.cleared_by == "validation" and cleared.clear_evidence["incident"] == str(incident.public_id)
        assert cleared.clear_evidence["job"] == str(verify.public_id)


def _diagnose(training_job, operator, run_shards):
    incident = services.open_incident(user=operator, training_job=training_job, transport="sim")
    services.start_runbook(incident=incident, user=operator)
    _run_phase(incident, run_shards, Phase.LOG)
    _run_phase(incident, run_shards, Phase.NETWORK)
    return incident


@pytest.mark.django_db(transaction=True)
def test_mtu_1500_concludes_mtu_mismatch_with_the_exact_command(training_job, inject, operator, run_shards):
    inject("gpu002", "mtu", "ens4np0")
    incident = _diagnose(training_job, operator, run_shards)
    assert incident.cause == Cause.MTU_MISMATCH
    fault = incident.evidence.get(topic="mtu", verdict="fault")
    assert (fault.hostname, fault.subject, fault.data) == ("gpu002", "ens4np0", {"mtu": 1500, "expected": 9000})
    assert services.dry_run(remediation=incident.remediations.get()) == ["gpu002$ ip link set dev ens4np0 mtu 9000"]
    top = incident.hypotheses.order_by("rank").first()
    assert top.cause == Cause.MTU_MISMATCH and fault in top.supporting.all()

    # The approval is in the audit log as one, by whom and of what (it read "Updated" alone).
    remediation = incident.remediations.get()
    services.approve_remediation(remediation=remediation, user=operator)
    approved = AuditEntry.objects.get(action=AuditAction.APPROVE, object_id=str(remediation.pk))
    assert approved.actor_name == operator.username and approved.get_action_display() == "Approved"
    assert "ip link set dev ens4np0 mtu 9000" in approved.changes["commands"][1]
    assert approved.changes["state"] == ["proposed", "approved"]  # the fields it changed, in the same entry
    # one entry: no "Updated" beside it for the same save (later steps of the fix may update it)
    updates = AuditEntry.objects.filter(action=AuditAction.UPDATE, object_id=str(remediation.pk))
    assert not [entry.changes for entry in updates if "approved_at" in entry.changes]


@pytest.mark.django_db(transaction=True)
def test_link_down_names_the_cable_and_switch_port_and_stays_unresolved_while_down(
    training_job, inject, operator, run_shards, settings
):
    settings.RACKPILOT_DIAGNOSIS_VERIFY_WAIT_SECONDS = 0
    inject("gpu004", "nic_down", "ens5np0")
    incident = _diagnose(training_job, operator, run_shards)
    assert incident.cause == Cause.LINK_DOWN
    remediation = incident.remediations.get()
    assert remediation.commands == []  # a person swaps the cable
    assert "gpu004 ens5np0: cable" in remediation.summary and "port" in remediation.summary
    # Approved while the link is still down: the re-check finds the symptom and the incident is not resolved.
    services.approve_remediation(remediation=remediation, user=operator)
    _run_phase(incident, run_shards, Phase.VERIFY)
    remediation.refresh_from_db()
    assert (incident.state, remediation.state) == (IncidentState.UNRESOLVED, RemediationState.INEFFECTIVE)
    assert "ens5np0" in remediation.outcome


@pytest.mark.django_db(transaction=True)
def test_xid79_concludes_gpu_lost(training_job, inject, operator, run_shards):
    inject("gpu001", "xid79", "2")
    incident = _diagnose(training_job, operator, run_shards)
    assert incident.cause == Cause.GPU_LOST
    cuda = incident.evidence.get(topic="cuda")
    assert cuda.hostname == "gpu001" and "CUDA error" in cuda.summary
    assert incident.evidence.get(topic="xid", verdict="fault").hostname == "gpu001"


@pytest.mark.django_db(transaction=True)
def test_clean_network_takes_the_storage_and_data_loader_branch_which_says_when_it_finds_nothing(
    demo_cluster, operator, run_shards
):
    from apps.inventory.models import Node

    incident = services.open_incident(user=operator, node=Node.objects.get(hostname="gpu010"), transport="sim")
    services.start_runbook(incident=incident, user=operator)
    _run_phase(incident, run_shards, Phase.NETWORK)
    assert incident.evidence.filter(topic="pfc", verdict="healthy").count() == 8
    assert incident.state == IncidentState.INVESTIGATING and not incident.cause
    _run_phase(incident, run_shards, Phase.STORAGE)
    assert not incident.evidence.filter(verdict="fault").exists()
    assert {"mounts", "io_pressure", "loader", "hung"} <= set(incident.evidence.values_list("topic", flat=True))
    assert incident.state == IncidentState.UNRESOLVED and not incident.cause
    assert incident.conclusion.startswith("Nothing found") and not incident.remediations.exists()


@pytest.mark.django_db(transaction=True)
def test_a_fault_back_after_its_fix_escalates(training_job, inject, age_changes, operator, run_shards, settings):
    settings.RACKPILOT_DIAGNOSIS_VERIFY_WAIT_SECONDS = 0
    fault = inject("gpu003", "pfc_off", "3", minutes_ago=90)
    first = _diagnose(training_job, operator, run_shards)
    services.approve_remediation(remediation=first.remediations.get(), user=operator)
    _run_phase(first, run_shards, Phase.FIX)
    age_changes(60)
    _run_phase(first, run_shards, Phase.VERIFY)
    assert first.state == IncidentState.RESOLVED
    sim.clear_fault(fault=fault)
    inject("gpu003", "pfc_off", "3", minutes_ago=20)  # it comes back (a switch reload lost the QoS profile)
    second = _diagnose(training_job, operator, run_shards)
    assert second.cause == Cause.PFC_OFF
    assert second.recurrence_of == first and second.escalated


@pytest.mark.django_db(transaction=True)
def test_a_full_checkpoint_volume_leads_to_the_storage_branch(training_job, inject, operator, run_shards):
    inject("gpu001", "disk_full", "/checkpoints", minutes_ago=30)
    incident = _diagnose(training_job, operator, run_shards)
    disk = incident.evidence.get(topic="disk")
    assert disk.hostname == "gpu001" and "No space left on device" in disk.excerpt
    assert not incident.cause  # the network checks on gpu001 ran clean: the storage branch is next
    _run_phase(incident, run_shards, Phase.STORAGE)
    space = incident.evidence.get(topic="space")
    assert space.verdict == "fault" and space.data["available"] == 0 and space.subject == "/checkpoints"
    assert incident.cause == Cause.CHECKPOINT_DISK_FULL
    remediation = incident.remediations.get()
    assert remediation.commands == [] and "/checkpoints" in remediation.summary and "runbook 3" in remediation.summary


@pytest.mark.django_db(transaction=True)
def test_evidence_and_ranking_changes_go_out_as_events_of_the_runbook_jobs(training_job, inject, operator, run_shards):
    from apps.jobs.models import JobEvent

    inject("gpu002", "mtu", "ens1np0")
    incident = _diagnose(training_job, operator, run_shards)
    events = JobEvent.objects.filter(job__in=incident.jobs.all()).order_by("job__created", "seq")
    pushed = [event.data["evidence"]["seq"] for event in events if "evidence" in event.data]
    assert sorted(pushed) == sorted(incident.evidence.values_list("seq", flat=True))
    rankings = [event.data["ranking"] for event in events if "ranking" in event.data]
    assert rankings and rankings[-1][0]["cause"] == Cause.MTU_MISMATCH
    assert len(rankings) == incident.ranking_changes.count()


@pytest.fixture
def time_passes(monkeypatch):
    """While the re-check waits between reads, simulated time moves on instead of the test sleeping: every moment
    the simulator reads (the fault's strike, the fix's change, the job's start) moves that much into the past."""
    from datetime import timedelta

    from asgiref.sync import sync_to_async
    from django.db import connection

    from apps.diagnosis.kinds import nccl_timeout
    from apps.simulator.models import SimChange, SimFault
    from apps.workloads.models import TrainingJob

    waited = []

    def shift(seconds: float) -> None:
        delta = timedelta(seconds=seconds)
        try:
            for change in SimChange.objects.all():
                SimChange.objects.filter(pk=change.pk).update(updated=change.updated - delta)
            for fault in SimFault.objects.all():
                SimFault.objects.filter(pk=fault.pk).update(created=fault.created - delta)
            for job in TrainingJob.objects.exclude(started_at=None):
                TrainingJob.objects.filter(pk=job.pk).update(started_at=job.started_at - delta)
        finally:
            connection.close()  # this runs in asgiref's executor thread: its connection would outlive the test

    async def wait(seconds: float) -> bool:
        waited.append(seconds)
        await sync_to_async(shift)(seconds)
        return False

    monkeypatch.setattr(nccl_timeout, "wait_unless_canceled", wait)
    return waited


@pytest.mark.django_db(transaction=True)
def test_a_recheck_right_after_the_fix_waits_for_every_node_to_restart_and_resolves(
    training_job, inject, operator, run_shards, settings, time_passes
):
    """The re-check starts a second after the fix: every node's log still ends in the timeouts the fix mended. It
    reads them again until the agents have restarted the workers and rank 0 iterates, then resolves."""
    from apps.simulator.training import RESTART_SECONDS

    settings.RACKPILOT_DIAGNOSIS_VERIFY_WAIT_SECONDS = 180
    inject("gpu003", "pfc_off", "3")
    incident = _diagnose(training_job, operator, run_shards)
    remediation = incident.remediations.get()
    services.approve_remediation(remediation=remediation, user=operator)
    _run_phase(incident, run_shards, Phase.FIX)
    _run_phase(incident, run_shards, Phase.VERIFY)
    remediation.refresh_from_db()
    assert (incident.state, remediation.state) == (IncidentState.RESOLVED, RemediationState.VERIFIED), (
        remediation.outcome
    )
    assert RESTART_SECONDS + STARTUP_SECONDS <= sum(time_passes) <= 180
    logs = incident.evidence.filter(topic__in=("watchdog", "progress"), job=remediation.verify_job)
    assert not logs.filter(verdict="fault").exists()


@pytest.mark.django_db(transaction=True)
def test_run_again_after_a_fix_with_nothing_left_to_check_resolves(
    training_job, inject, age_changes, operator, run_shards, settings
):
    settings.RACKPILOT_DIAGNOSIS_VERIFY_WAIT_SECONDS = 0
    inject("gpu003", "pfc_off", "3")
    incident = _diagnose(training_job, operator, run_shards)
    remediation = incident.remediations.get()
    services.approve_remediation(remediation=remediation, user=operator)
    _run_phase(incident, run_shards, Phase.FIX)
    _run_phase(incident, run_shards, Phase.VERIFY)  # at once, no wait: too early to see training back
    remediation.refresh_from_db()
    assert (incident.state, remediation.state) == (IncidentState.UNRESOLVED, RemediationState.INEFFECTIVE)
    age_changes(10)
    services.start_runbook(incident=incident, user=operator)  # "Run the runbook again"
    _run_phase(incident, run_shards, Phase.LOG)
    remediation.refresh_from_db()
    assert (incident.state, remediation.state) == (IncidentState.RESOLVED, RemediationState.VERIFIED), (
        remediation.outcome
    )
    assert "training progresses again" in remediation.outcome
