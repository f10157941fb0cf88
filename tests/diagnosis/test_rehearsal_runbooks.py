"""Rehearsals choose the runbook a real incident would: a power cap, heat, held clocks, a starved loader or a second
trainer slows the job (runbook 2, from the utilisation series); a mount that stops answering hangs it with only NCCL
timeouts in its log (runbook 1, down its storage branch). Each runs to the fault's node and cause; viewers cannot
start one."""

import pytest
from django.urls import reverse

from apps.diagnosis.choices import Cause, EvidenceVerdict, IncidentState
from apps.diagnosis.models import Incident
from apps.diagnosis.phases import Phase
from apps.inventory.models import Node
from apps.jobs.models import Job
from apps.simulator import services as sim
from apps.workloads.choices import Launcher
from apps.workloads.models import TrainingJob

REHEARSE = reverse("incident-rehearse")
API = "/api/incidents/rehearsals/"


def _fault(hostname, kind, target="", **parameters):
    return sim.inject_fault(node=Node.objects.get(hostname=hostname), kind=kind, target=target, parameters=parameters)


def _faults(incident, topic):
    return list(incident.evidence.filter(topic=topic, verdict=EvidenceVerdict.FAULT))


@pytest.mark.django_db
def test_the_button_is_beside_the_faults_that_slow_a_job_and_the_storage_fault(demo_cluster, browser_as, operator):
    faults = [
        _fault("gpu002", "power_cap", "3", watts=450),
        _fault("gpu003", "thermal", "6", temperature=94),
        _fault("gpu004", "straggler"),
        _fault("gpu005", "dataloader_stall"),
        _fault("gpu006", "co_located"),
        _fault("gpu007", "storage_slow", "/checkpoints"),
    ]
    page = browser_as(operator).get(reverse("simulator")).content.decode()
    assert all(f'name="fault" value="{fault.public_id}"' in page for fault in faults)


@pytest.mark.django_db(transaction=True)
def test_a_power_cap_rehearses_runbook_2_and_concludes_power_capped_on_its_gpu(
    demo_cluster, browser_as, operator, run_phase
):
    fault = _fault("gpu010", "power_cap", "3", watts=450)
    response = browser_as(operator).post(REHEARSE, {"fault": str(fault.public_id)})
    incident = Incident.objects.get()
    assert response.status_code == 302 and incident.rehearsal
    assert (incident.runbook, incident.transport, incident.training_job.name) == (
        "gpu-utilisation",
        "sim",
        "rehearsal-gpu010",
    )
    run_phase(incident, Phase.SAMPLE)
    assert (incident.state, incident.cause) == (IncidentState.CONCLUDED, Cause.GPU_POWER_CAPPED)
    (capped,) = _faults(incident, "power_cap")
    assert (capped.hostname, capped.subject) == ("gpu010", "GPU 3") and "450 W" in capped.summary
    assert incident.evidence.get(topic="lag").data["gpus"] == [["gpu010", 3]]
    assert list(incident.suspect_nodes.values_list("hostname", flat=True)) == ["gpu010"]


@pytest.mark.django_db(transaction=True)
def test_a_second_trainer_rehearses_runbook_2_through_the_scheduler(demo_cluster, api_as, operator, run_phase):
    _fault("gpu010", "co_located", speed_pct=55)
    response = api_as(operator).post(API, {"node": "gpu010", "kind": "co_located"}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["runbook"] == "gpu-utilisation" and response.json()["rehearsal"] is True
    incident = Incident.objects.get()
    assert incident.training_job.launcher == Launcher.KUBERNETES  # the second trainer is the scheduler's placement
    run_phase(incident, Phase.SAMPLE)
    assert _faults(incident, "lag") and not _faults(incident, "power_cap")
    run_phase(incident, Phase.SCHEDULER)
    (placed,) = _faults(incident, "placement")
    assert placed.hostname == "gpu010" and "finetune-7b-worker-0" in placed.summary
    assert (incident.state, incident.cause) == (IncidentState.CONCLUDED, Cause.CO_LOCATED_TRAINER)
    assert "podAntiAffinity" in incident.remediations.get().artefact


@pytest.mark.django_db(transaction=True)
def test_a_storage_fault_rehearses_runbook_1_down_its_storage_branch_to_the_mount(
    demo_cluster, api_as, operator, run_phase
):
    fault = _fault("gpu005", "storage_slow", "/checkpoints")
    response = api_as(operator).post(API, {"fault": str(fault.public_id)}, format="json")
    assert response.status_code == 201, response.json()
    incident = Incident.objects.get()
    assert incident.runbook == "nccl-timeout" and incident.rehearsal  # the log shows only NCCL timeouts
    for phase in (Phase.LOG, Phase.NETWORK, Phase.STORAGE):
        run_phase(incident, phase)
    assert list(incident.suspect_nodes.values_list("hostname", flat=True)) == ["gpu005"]
    hung = incident.evidence.get(topic="hung")
    assert hung.verdict == EvidenceVerdict.FAULT and hung.subject == "/checkpoints"
    assert (incident.state, incident.cause) == (IncidentState.CONCLUDED, Cause.STORAGE_SLOW)
    assert "/checkpoints" in incident.remediations.get().summary


@pytest.mark.django_db
def test_viewers_cannot_rehearse_a_utilisation_or_storage_fault(demo_cluster, browser_as, api_as, viewer):
    faults = [_fault("gpu002", "power_cap", "3"), _fault("gpu005", "storage_slow", "/checkpoints")]
    page = browser_as(viewer)
    assert "Rehearse runbook" not in page.get(reverse("simulator")).content.decode()
    for fault in faults:
        assert page.post(REHEARSE, {"fault": str(fault.public_id)}).status_code == 403
        assert api_as(viewer).post(API, {"fault": str(fault.public_id)}, format="json").status_code == 403
    assert not Incident.objects.exists() and not Job.objects.exists() and not TrainingJob.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_loader_stall_past_the_watchdog_rehearses_runbook_1_and_a_short_one_runbook_2(
    demo_cluster, api_as, operator, run_phase
):
    api = api_as(operator)
    short = _fault("gpu004", "dataloader_stall", period_s=5, stall_pct=40)
    assert api.post(API, {"fault": str(short.public_id)}, format="json").json()["runbook"] == "gpu-utilisation"
    stuck = _fault("gpu010", "dataloader_stall", hang_s=3600)  # a worker stuck for an hour: the peers time out
    response = api.post(API, {"fault": str(stuck.public_id)}, format="json")
    assert response.status_code == 201 and response.json()["runbook"] == "nccl-timeout"
    incident = Incident.objects.get(training_job__name="rehearsal-gpu010")
    for phase in (Phase.LOG, Phase.NETWORK, Phase.STORAGE):
        run_phase(incident, phase)
    assert list(incident.suspect_nodes.values_list("hostname", flat=True)) == ["gpu010"]
    assert incident.evidence.get(topic="lag").data["hosts"] == ["gpu010"]
    assert incident.evidence.get(topic="loader").verdict == EvidenceVerdict.FAULT
    assert incident.evidence.get(topic="hung").verdict == EvidenceVerdict.HEALTHY  # no mount stopped answering
    assert (incident.state, incident.cause) == (IncidentState.CONCLUDED, Cause.DATALOADER_STALL)
    assert "num_workers" in incident.remediations.get().summary
