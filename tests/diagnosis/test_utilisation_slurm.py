"""Runbook 2 on a Slurm training job: the scheduler's placement is read on the controller (`scontrol show job -d`),
a second job on a node behind is named with its node and its CPUs/GPUs there, and the fix is the job requeued
exclusive (shown before a person runs it)."""

import pytest
from django.urls import reverse

from apps.diagnosis import services
from apps.diagnosis.choices import Cause, EvidenceVerdict, IncidentState, RemediationState
from apps.diagnosis.phases import Phase
from apps.simulator.models import SimFault
from apps.workloads.choices import Launcher


def _slurm_job(training_job):
    training_job.launcher = Launcher.SLURM
    training_job.save()
    return training_job


def _diagnose(training_job, operator, run_phase):
    incident = services.open_incident(
        user=operator, training_job=training_job, transport="sim", runbook="gpu-utilisation"
    )
    services.start_runbook(incident=incident, user=operator, sample_seconds=15)
    run_phase(incident, Phase.SAMPLE)
    return incident


@pytest.mark.django_db(transaction=True)
def test_a_co_located_slurm_job_is_named_with_its_node_and_the_exclusive_requeue(
    training_job, inject, operator, run_phase, client, settings
):
    _slurm_job(training_job)
    inject("gpu003", "co_located", speed_pct=55)
    incident = _diagnose(training_job, operator, run_phase)
    assert incident.state == IncidentState.INVESTIGATING  # a node behind, nothing holding its clocks
    job = run_phase(incident, Phase.SCHEDULER)
    assert [node.hostname for node in job.nodes.all()] == ["mgmt01"]  # the first management node
    (placed,) = [row for row in incident.evidence.filter(topic="placement") if row.verdict == EvidenceVerdict.FAULT]
    assert placed.hostname == "gpu003" and placed.command == "scontrol show job -d"
    assert "finetune-7b" in placed.summary and "OverSubscribe=OK" in placed.summary
    assert "JobName=llm-pretrain" in placed.excerpt and "JobName=finetune-7b" in placed.excerpt
    assert "Nodes=gpu003 CPU_IDs=" in placed.excerpt
    job_id = placed.data["slurm_job"]
    assert [other["name"] for other in placed.data["others"]] == ["finetune-7b"] and placed.data["exclusive"] is False
    healthy = incident.evidence.filter(topic="placement", verdict=EvidenceVerdict.HEALTHY)
    assert not healthy.exists()  # only the node behind is judged
    assert incident.cause == Cause.CO_LOCATED_TRAINER
    remediation = incident.remediations.get()
    assert remediation.commands == []  # shown, then done by a person on the controller
    assert f"requeue Slurm job {job_id}" in remediation.summary and "gpu003" in remediation.summary
    assert f"scontrol requeuehold {job_id}\nscontrol update JobId={job_id} OverSubscribe=NO\n" in remediation.artefact
    assert "#SBATCH --exclusive" in remediation.artefact and "mgmt01" in remediation.artefact
    assert "podAntiAffinity" not in remediation.artefact
    client.force_login(operator)
    page = client.get(reverse("incident-detail", args=[incident.public_id])).content.decode()
    assert f'id="artefact-{remediation.public_id}"' in page and "OverSubscribe=NO" in page
    SimFault.objects.filter(kind="co_located").delete()  # the person requeued it: the nodes are the job's alone
    services.approve_remediation(remediation=remediation, user=operator)
    run_phase(incident, Phase.VERIFY)
    remediation.refresh_from_db()
    assert remediation.state == RemediationState.VERIFIED, remediation.outcome


@pytest.mark.django_db(transaction=True)
def test_the_controller_setting_names_the_host_and_a_lone_job_is_no_placement_fault(
    training_job, inject, operator, run_phase, settings
):
    settings.RACKPILOT_SCHEDULER_CONTROLLER = "mgmt02"
    _slurm_job(training_job)
    inject("gpu003", "co_located", speed_pct=55)
    incident = _diagnose(training_job, operator, run_phase)
    SimFault.objects.filter(kind="co_located").delete()  # gone before the scheduler is read
    job = run_phase(incident, Phase.SCHEDULER)
    assert [node.hostname for node in job.nodes.all()] == ["mgmt02"]
    placement = incident.evidence.get(topic="placement")
    assert placement.verdict == EvidenceVerdict.HEALTHY and placement.hostname == "gpu003"
    assert "only job" in placement.summary and "llm-pretrain" in placement.summary
    assert incident.state == IncidentState.UNRESOLVED and not incident.cause
