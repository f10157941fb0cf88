"""Runbook 1's storage / data-loader branch on the simulator: an NFS server that stops answering hangs a node's
ranks (their peers' watchdog fires, the network checks run clean), and the branch names the mount and its server;
a starved data loader is named with runbook 2's fix, from the node or, once one stall outlasts the watchdog, from
the job's log; the re-check after a fix done by hand resolves it."""

import pytest

from apps.diagnosis import services
from apps.diagnosis.choices import Cause, IncidentState, RemediationState
from apps.diagnosis.phases import Phase
from apps.inventory.models import Node
from apps.simulator import services as sim

pytestmark = pytest.mark.usefixtures("on_the_simulator")


def _diagnose(training_job, operator, run_phase):
    incident = services.open_incident(user=operator, training_job=training_job, transport="sim")
    services.start_runbook(incident=incident, user=operator)
    for phase in (Phase.LOG, Phase.NETWORK, Phase.STORAGE):
        run_phase(incident, phase)
    return incident


@pytest.mark.django_db(transaction=True)
def test_an_nfs_server_not_responding_is_named_with_its_mount_and_resolves_once_it_answers(
    training_job, inject, age_changes, operator, run_phase, settings
):
    settings.RACKPILOT_DIAGNOSIS_VERIFY_WAIT_SECONDS = 0
    fault = inject("gpu003", "storage_slow", "/checkpoints")
    incident = _diagnose(training_job, operator, run_phase)
    assert list(incident.suspect_nodes.values_list("hostname", flat=True)) == ["gpu003"]
    assert incident.evidence.get(topic="lag").data["hosts"] == ["gpu003"]
    assert not incident.evidence.filter(topic="ib").exists()  # no NET/IB warning: the fabric is not involved
    assert not incident.evidence.filter(topic__in=("mtu", "pfc", "link", "xid"), verdict="fault").exists()
    hung = incident.evidence.get(topic="hung")
    assert hung.verdict == "fault" and hung.subject == "/checkpoints" and hung.data["servers"] == ["ckpt-gw"]
    assert "nfs: server ckpt-gw not responding, still trying" in hung.excerpt
    assert "INFO: task pt_data_worker:" in hung.excerpt
    assert incident.evidence.get(topic="io_pressure").verdict == "fault"
    assert incident.evidence.get(topic="blocked").data["blocked"] == 64  # 8 ranks x 8 workers, all in D
    assert incident.evidence.get(topic="loader").verdict == "healthy"
    assert incident.cause == Cause.STORAGE_SLOW and incident.state == IncidentState.CONCLUDED
    remediation = incident.remediations.get()
    assert remediation.commands == []  # a person brings the server back
    assert "/checkpoints (nfs4 from ckpt-gw:/checkpoints) not responding" in remediation.summary
    top = incident.hypotheses.order_by("rank").first()
    assert top.cause == Cause.STORAGE_SLOW and hung in top.supporting.all()

    sim.clear_fault(fault=fault)  # the server answers again
    services.approve_remediation(remediation=remediation, user=operator)  # "done by hand"
    verify = run_phase(incident, Phase.VERIFY)
    assert verify.parameters["branch"] == "storage"
    assert incident.evidence.filter(job=verify, topic="hung", verdict="healthy").exists()
    remediation.refresh_from_db()
    assert remediation.state == RemediationState.VERIFIED, remediation.outcome
    assert incident.state == IncidentState.RESOLVED


@pytest.mark.django_db(transaction=True)
def test_a_starved_data_loader_is_named_with_runbook_2s_fix(training_job, inject, operator, run_phase):
    inject("gpu002", "dataloader_stall", "")
    incident = services.open_incident(user=operator, node=Node.objects.get(hostname="gpu002"), transport="sim")
    services.start_runbook(incident=incident, user=operator)
    run_phase(incident, Phase.NETWORK)
    run_phase(incident, Phase.STORAGE)
    loader = incident.evidence.get(topic="loader")
    assert loader.verdict == "fault" and loader.data["workers"] == [1] * 8
    assert incident.evidence.get(topic="io_pressure").verdict == "healthy"
    assert incident.evidence.get(topic="hung").verdict == "healthy"
    assert incident.cause == Cause.DATALOADER_STALL
    summary = incident.remediations.get().summary
    assert "num_workers" in summary and "pin_memory=True" in summary and "gpu002" in summary


@pytest.mark.django_db(transaction=True)
def test_a_loader_stalled_past_the_watchdog_times_the_peers_out_and_runbook_1_names_it(
    training_job, inject, operator, run_phase
):
    inject("gpu002", "dataloader_stall", hang_s=3600)
    incident = _diagnose(training_job, operator, run_phase)
    assert incident.evidence.filter(topic="watchdog", verdict="fault").exists()  # the peers timed out
    assert incident.evidence.get(topic="lag").data["hosts"] == ["gpu002"]
    assert not incident.evidence.filter(topic="ib").exists()
    assert incident.evidence.get(topic="loader").data["workers"] == [1] * 8
    assert incident.cause == Cause.DATALOADER_STALL and incident.state == IncidentState.CONCLUDED


@pytest.mark.django_db(transaction=True)
def test_a_short_loader_stall_leaves_the_log_without_a_timeout(training_job, inject, operator, run_phase):
    inject("gpu002", "dataloader_stall", period_s=5, stall_pct=40)
    incident = services.open_incident(user=operator, training_job=training_job, transport="sim")
    services.start_runbook(incident=incident, user=operator)
    run_phase(incident, Phase.LOG)
    assert not incident.evidence.filter(topic="watchdog", verdict="fault").exists()
    assert not incident.suspect_nodes.exists()


@pytest.mark.django_db(transaction=True)
def test_a_healthy_node_with_a_running_job_shows_a_fed_loader_and_nothing_found(training_job, operator, run_phase):
    incident = services.open_incident(user=operator, node=Node.objects.get(hostname="gpu004"), transport="sim")
    services.start_runbook(incident=incident, user=operator)
    run_phase(incident, Phase.NETWORK)
    run_phase(incident, Phase.STORAGE)
    loader = incident.evidence.get(topic="loader")
    assert loader.verdict == "healthy" and loader.data["workers"] == [8] * 8
    assert not incident.evidence.filter(verdict="fault").exists()
    assert incident.state == IncidentState.UNRESOLVED and incident.conclusion.startswith("Nothing found")
