"""Runbook 2 end to end on the simulator: each fault gives its branch, its conclusion and its fix; a healthy job
gives none."""

import pytest
from django.urls import reverse

from apps.diagnosis import services
from apps.diagnosis.choices import Cause, EvidenceVerdict, IncidentState, RemediationState
from apps.diagnosis.phases import Phase
from apps.simulator.models import SimFault
from apps.workloads.choices import Launcher


def _diagnose(training_job, operator, run_phase):
    incident = services.open_incident(
        user=operator, training_job=training_job, transport="sim", runbook="gpu-utilisation"
    )
    services.start_runbook(incident=incident, user=operator)
    run_phase(incident, Phase.SAMPLE)
    return incident


def _faults(incident, topic):
    return list(incident.evidence.filter(topic=topic, verdict=EvidenceVerdict.FAULT))


@pytest.mark.django_db(transaction=True)
def test_a_healthy_job_raises_no_alarm(training_job, operator, run_phase):
    incident = _diagnose(training_job, operator, run_phase)
    assert incident.state == IncidentState.UNRESOLVED and not incident.cause
    assert "steady" in incident.conclusion
    assert not incident.evidence.filter(verdict=EvidenceVerdict.FAULT).exists()
    series = incident.evidence.filter(topic="series")
    assert series.count() == 4 and all(row.artifact_id for row in series)  # the raw output of every node
    assert incident.evidence.get(topic="lag").verdict == EvidenceVerdict.HEALTHY
    assert not incident.remediations.exists()


@pytest.mark.django_db(transaction=True)
def test_power_cap_on_one_gpu_is_found_fixed_and_resolved(training_job, inject, operator, run_phase, settings):
    inject("gpu002", "power_cap", "3", watts=450)
    incident = _diagnose(training_job, operator, run_phase)
    assert incident.cause == Cause.GPU_POWER_CAPPED
    (capped,) = _faults(incident, "power_cap")
    assert (capped.hostname, capped.subject) == ("gpu002", "GPU 3")
    assert "sw_power_cap" in capped.summary and "450 W" in capped.summary
    lag = incident.evidence.get(topic="lag")
    assert lag.verdict == EvidenceVerdict.FAULT and lag.data["gpus"] == [["gpu002", 3]]
    assert list(incident.suspect_nodes.values_list("hostname", flat=True)) == ["gpu002"]
    remediation = incident.remediations.get()
    assert services.dry_run(remediation=remediation) == ["gpu002$ nvidia-smi -i 3 -pl 700"]
    top = incident.hypotheses.order_by("rank").first()
    assert top.cause == Cause.GPU_POWER_CAPPED and capped in top.supporting.all()
    services.approve_remediation(remediation=remediation, user=operator)
    run_phase(incident, Phase.FIX)
    run_phase(incident, Phase.VERIFY)
    remediation.refresh_from_db()
    assert remediation.state == RemediationState.VERIFIED, remediation.outcome
    assert incident.state == IncidentState.RESOLVED


@pytest.mark.django_db(transaction=True)
def test_thermal_slowdown_suggests_cooling_with_the_node_and_gpu(training_job, inject, operator, run_phase):
    inject("gpu004", "thermal", "6", temperature=94)
    incident = _diagnose(training_job, operator, run_phase)
    assert incident.cause == Cause.GPU_THERMAL
    (hot,) = _faults(incident, "thermal")
    assert (hot.hostname, hot.subject) == ("gpu004", "GPU 6")
    assert "hw_thermal_slowdown" in hot.summary
    remediation = incident.remediations.get()
    assert remediation.commands == [] and "Cooling" in remediation.summary and "gpu004 GPU 6" in remediation.summary


@pytest.mark.django_db(transaction=True)
def test_a_straggler_held_by_application_clocks(training_job, inject, operator, run_phase):
    inject("gpu001", "straggler")
    incident = _diagnose(training_job, operator, run_phase)
    assert incident.cause == Cause.GPU_CLOCKS_CAPPED
    assert {row.hostname for row in _faults(incident, "clocks_capped")} == {"gpu001"}
    assert len(_faults(incident, "clocks_capped")) == 8
    assert "nvidia-smi -rac" in incident.remediations.get().summary


@pytest.mark.django_db(transaction=True)
def test_dataloader_stall_shows_periodic_dips_on_every_gpu(training_job, inject, operator, run_phase):
    inject("gpu003", "dataloader_stall", period_s=5, stall_pct=40)
    incident = _diagnose(training_job, operator, run_phase)
    assert incident.cause == Cause.DATALOADER_STALL
    (dips,) = _faults(incident, "dips")
    assert dips.data["gpus"] == 32 and dips.data["period_s"] == pytest.approx(5.0, abs=0.4)
    assert dips.data["share"] == pytest.approx(0.4, abs=0.08)
    assert incident.evidence.get(topic="lag").verdict == EvidenceVerdict.HEALTHY
    assert "num_workers" in incident.remediations.get().summary


@pytest.mark.django_db(transaction=True)
def test_a_second_trainer_on_a_node_gives_the_scheduler_fix(training_job, inject, operator, run_phase, client):
    training_job.launcher = Launcher.KUBERNETES
    training_job.save()
    inject("gpu003", "co_located", speed_pct=55)
    client.force_login(operator)
    incident = _diagnose(training_job, operator, run_phase)
    assert not _faults(incident, "power_cap") and _faults(incident, "lag")
    assert incident.state == IncidentState.INVESTIGATING  # no reason holds the clocks: the scheduler is read next
    job = run_phase(incident, Phase.SCHEDULER)
    assert [node.hostname for node in job.nodes.all()] == ["mgmt01"]  # the scheduler controller, not a node behind
    (placed,) = _faults(incident, "placement")
    assert placed.hostname == "gpu003" and "finetune-7b-worker-0" in placed.summary
    assert "llm-pretrain-worker-2" in placed.excerpt and "finetune-7b-worker-0" in placed.excerpt
    assert incident.cause == Cause.CO_LOCATED_TRAINER
    remediation = incident.remediations.get()
    assert "podAntiAffinity" in remediation.artefact and "KubeSchedulerConfiguration" in remediation.artefact
    assert "kubernetes.io/hostname" in remediation.artefact
    page = client.get(reverse("incident-detail", args=[incident.public_id]))
    assert f'id="artefact-{remediation.public_id}"' in page.content.decode()
    # Done by hand: once the second trainer is gone, the re-sample finds every GPU keeping up.
    SimFault.objects.filter(kind="co_located").delete()
    services.approve_remediation(remediation=remediation, user=operator)
    run_phase(incident, Phase.VERIFY)
    remediation.refresh_from_db()
    assert remediation.state == RemediationState.VERIFIED, remediation.outcome


@pytest.mark.django_db(transaction=True)
def test_a_node_behind_with_nothing_found_stays_unresolved_without_a_guess(training_job, inject, operator, run_phase):
    training_job.launcher = Launcher.KUBERNETES
    training_job.save()
    inject("gpu003", "co_located", speed_pct=55)
    incident = _diagnose(training_job, operator, run_phase)
    SimFault.objects.filter(kind="co_located").delete()  # gone before the scheduler is read
    run_phase(incident, Phase.SCHEDULER)
    assert incident.evidence.get(topic="placement").verdict == EvidenceVerdict.HEALTHY
    assert incident.state == IncidentState.UNRESOLVED and not incident.cause
    assert "gpu003 behind the fleet" in incident.conclusion


@pytest.mark.django_db(transaction=True)
def test_the_runbook_needs_the_training_job(demo_cluster, operator):
    from apps.inventory.models import Node

    with pytest.raises(services.IncidentError) as error:
        services.open_incident(user=operator, node=Node.objects.get(hostname="gpu001"), runbook="gpu-utilisation")
    assert error.value.field == "training_job"


@pytest.mark.django_db
def test_the_api_opens_runbook_2_on_a_training_job_and_refuses_it_on_a_node(training_job, api_as, operator, viewer):
    from apps.diagnosis.models import Incident

    client = api_as(operator)
    refused = client.post("/api/incidents/", {"node": "gpu001", "runbook": "gpu-utilisation"}, format="json")
    assert refused.status_code == 400 and "training_job" in refused.json()
    assert not Incident.objects.exists()
    body = {"training_job": str(training_job.public_id), "runbook": "gpu-utilisation", "start": False}
    assert api_as(viewer).post("/api/incidents/", body, format="json").status_code == 403
    opened = client.post("/api/incidents/", body, format="json")
    assert opened.status_code == 201 and opened.json()["runbook"] == "gpu-utilisation"
    assert opened.json()["title"] == "GPU utilisation fluctuating: llm-pretrain"


@pytest.mark.django_db
def test_the_page_opens_runbook_2_and_a_node_alone_is_a_form_error(training_job, browser_as, operator):
    from apps.diagnosis.models import Incident

    page = browser_as(operator)
    refused = page.post(reverse("incident-open"), {"node": "gpu001", "transport": "sim", "runbook": "gpu-utilisation"})
    assert refused.status_code == 400 and "needs the training job" in refused.content.decode()
    assert not Incident.objects.exists()
    body = {"training_job": str(training_job.public_id), "transport": "sim", "runbook": "gpu-utilisation"}
    response = page.post(reverse("incident-open"), body)
    incident = Incident.objects.get()
    assert response.status_code == 302 and incident.runbook == "gpu-utilisation"
    assert list(incident.jobs.values_list("kind", "parameters__phase")) == [("gpu-utilisation", "sample")]
