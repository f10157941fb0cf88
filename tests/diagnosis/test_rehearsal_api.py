"""Rehearsals over the API: `POST /api/incidents/rehearsals/` starts the fault's runbook as the simulator page does;
operators only; a fault that hurts no training job, or one that is not there, is a 400 naming the field, with nothing
made."""

import pytest
from drf_spectacular.generators import SchemaGenerator

from apps.diagnosis.models import Incident
from apps.diagnosis.phases import Phase
from apps.inventory.models import Node
from apps.jobs.models import Job
from apps.simulator import services as sim
from apps.workloads.models import TrainingJob

URL = "/api/incidents/rehearsals/"


def _fault(hostname, kind, target=""):
    return sim.inject_fault(node=Node.objects.get(hostname=hostname), kind=kind, target=target)


def _nothing_made():
    return not Incident.objects.exists() and not Job.objects.exists() and not TrainingJob.objects.exists()


@pytest.mark.django_db
def test_anonymous_and_viewers_cannot_rehearse(demo_cluster, api_as, viewer, client):
    fault = _fault("gpu003", "pfc_off", "3")
    assert client.post(URL, {"fault": str(fault.public_id)}, content_type="application/json").status_code in (401, 403)
    assert api_as(viewer).post(URL, {"fault": str(fault.public_id)}, format="json").status_code == 403
    assert _nothing_made()


@pytest.mark.django_db(transaction=True)
def test_an_operator_rehearses_by_fault_id_on_the_job_it_hurts(training_job, api_as, operator):
    fault = _fault("gpu003", "pfc_off", "3")
    response = api_as(operator).post(URL, {"fault": str(fault.public_id)}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    incident = Incident.objects.get()
    assert body["id"] == str(incident.public_id) and body["rehearsal"] is True
    assert (body["runbook"], body["training_job"], body["state"]) == ("nccl-timeout", "llm-pretrain", "investigating")
    assert incident.transport == "sim" and incident.opened_by == operator
    assert incident.jobs.get().parameters["phase"] == Phase.LOG


@pytest.mark.django_db
def test_by_node_and_kind_the_storage_fault_rehearses_runbook_3(demo_cluster, api_as, operator):
    _fault("gpu005", "disk_full", "/checkpoints")
    response = api_as(operator).post(URL, {"node": "gpu005", "kind": "disk_full"}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["runbook"] == "training-interrupted"
    assert Incident.objects.get().training_job.checkpoint_dir == "/checkpoints/rehearsal-gpu005"


@pytest.mark.django_db
def test_bad_input_is_a_400_naming_the_field_and_makes_nothing(demo_cluster, api_as, operator):
    api = api_as(operator)
    harmless = _fault("gpu004", "nvlink_down", "0")
    answers = {
        "harmless": api.post(URL, {"fault": str(harmless.public_id)}, format="json"),
        "missing": api.post(URL, {"fault": "00000000-0000-0000-0000-000000000000"}, format="json"),
        "empty": api.post(URL, {}, format="json"),
        "no kind": api.post(URL, {"node": "gpu004"}, format="json"),
        "no node": api.post(URL, {"node": "gpu999", "kind": "pfc_off"}, format="json"),
        "not there": api.post(URL, {"node": "gpu004", "kind": "pfc_off"}, format="json"),
        "not a uuid": api.post(URL, {"fault": "gpu004"}, format="json"),
    }
    fields = {name: (answer.status_code, sorted(answer.json())) for name, answer in answers.items()}
    assert fields == {
        "harmless": (400, ["fault"]),
        "missing": (400, ["fault"]),
        "empty": (400, ["fault"]),
        "no kind": (400, ["kind"]),
        "no node": (400, ["node"]),
        "not there": (400, ["kind"]),
        "not a uuid": (400, ["fault"]),
    }
    assert "does not hurt a training job" in answers["harmless"].json()["fault"][0]
    assert _nothing_made()


def test_the_schema_types_the_rehearsal_request_and_answer():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    operation = schema["paths"][URL]["post"]
    request = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert set(schema["components"]["schemas"][request]["properties"]) == {"fault", "node", "kind"}
    assert operation["responses"]["201"]["content"]["application/json"]["schema"]["$ref"].endswith("/IncidentDetail")
