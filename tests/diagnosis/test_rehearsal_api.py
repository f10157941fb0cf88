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


@pytest.mark.django_db
def test_every_bad_field_is_named_at_once_and_nothing_is_made(demo_cluster, api_as, operator):
    """A node or kind refused by its shape no longer hides what the rehearsal's checks say of the other (no such
    node, a kind that hurts no training job, a kind not named)."""
    api = api_as(operator)
    cases = [
        ({"node": "gpu999", "kind": "k" * 25}, {"node": "No node matches", "kind": "Not a kind a runbook can be"}),
        ({"node": "gpu999", "kind": "nvlink_down"}, {"node": "No node matches", "kind": "Not a kind a runbook can be"}),
        (
            {"node": "g" * 256, "kind": "bogus"},
            {"node": "no more than 255", "kind": "Not a kind a runbook can be rehearsed against"},
        ),
        ({"node": "g" * 256}, {"node": "no more than 255", "kind": "Name the fault's kind"}),
    ]
    for body, expected in cases:
        answer = api.post(URL, body, format="json")
        assert answer.status_code == 400 and set(answer.json()) == set(expected), (body, answer.json())
        for field, words in expected.items():
            assert words in answer.json()[field][0], (body, answer.json())
    assert _nothing_made()


def test_the_schema_types_the_rehearsal_request_and_answer():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    operation = schema["paths"][URL]["post"]
    request = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert set(schema["components"]["schemas"][request]["properties"]) == {"fault", "node", "kind"}
    assert operation["responses"]["201"]["content"]["application/json"]["schema"]["$ref"].endswith("/IncidentDetail")


@pytest.fixture
def demo_workloads(demo_cluster):
    """The shipped demo's workloads: chat-llama-70b serving on gpu001-gpu004, llama-pretrain on gpu005-gpu020."""
    from apps.workloads.demo import load_workloads

    load_workloads()


PRODUCTION = {f"gpu{number:03d}" for number in range(1, 21)}


def _hosts(job):
    return {member.node.hostname for member in job.members.select_related("node")}


@pytest.mark.django_db
def test_a_fault_on_the_demo_training_job_rehearses_on_that_job(demo_workloads, api_as, operator):
    fault = _fault("gpu007", "pfc_off", "3")
    response = api_as(operator).post(URL, {"fault": str(fault.public_id)}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["training_job"] == "llama-pretrain"
    assert list(TrainingJob.objects.values_list("name", flat=True)) == ["llama-pretrain"]  # nothing made
    assert Incident.objects.get().rehearsal_job_made is False


@pytest.mark.django_db
def test_a_demo_job_runs_on_the_faulty_node_and_idle_peers_never_on_production_nodes(demo_workloads, api_as, operator):
    fault = _fault("gpu021", "pfc_off", "3")
    assert api_as(operator).post(URL, {"fault": str(fault.public_id)}, format="json").status_code == 201
    incident = Incident.objects.get()
    made = incident.training_job
    assert made.name == "rehearsal-gpu021" and incident.rehearsal_job_made
    assert "gpu021" in _hosts(made) and len(_hosts(made)) == 4
    assert not _hosts(made) & PRODUCTION, _hosts(made)


@pytest.mark.django_db
def test_a_rehearsal_ends_the_job_it_made_when_it_is_resolved(demo_workloads, api_as, operator):
    from apps.diagnosis.choices import IncidentState
    from apps.workloads.choices import TrainingState

    fault = _fault("gpu021", "pfc_off", "3")
    api_as(operator).post(URL, {"fault": str(fault.public_id)}, format="json")
    incident = Incident.objects.get()
    incident.state = IncidentState.RESOLVED  # as the re-check leaves it
    incident.save()
    assert TrainingJob.objects.get(name="rehearsal-gpu021").state == TrainingState.COMPLETED
    assert TrainingJob.objects.get(name="llama-pretrain").state == TrainingState.RUNNING


@pytest.mark.django_db
def test_clearing_the_fault_by_hand_leaves_the_made_job_training_for_the_recheck(demo_workloads, api_as, operator):
    """Clearing the fault on the simulator is the fix done by hand: the job the rehearsal made keeps training (its log
    with it), so the re-check can see it resume; it ends when the rehearsal resolves."""
    from apps.diagnosis.choices import IncidentState
    from apps.workloads.choices import TrainingState

    fault = _fault("gpu021", "pfc_off", "3")
    api_as(operator).post(URL, {"fault": str(fault.public_id)}, format="json")
    sim.clear_fault(fault=fault)
    assert TrainingJob.objects.get(name="rehearsal-gpu021").state == TrainingState.RUNNING

    incident = Incident.objects.get()
    incident.state = IncidentState.RESOLVED  # as the re-check leaves it
    incident.save()
    assert TrainingJob.objects.get(name="rehearsal-gpu021").state == TrainingState.COMPLETED


@pytest.mark.django_db
def test_a_fault_on_a_node_that_serves_inference_and_trains_nothing_is_refused(demo_workloads, api_as, operator):
    fault = _fault("gpu002", "pfc_off", "3")  # gpu002 serves chat-llama-70b
    response = api_as(operator).post(URL, {"fault": str(fault.public_id)}, format="json")

    assert response.status_code == 400, response.json()
    assert "serves the inference service chat-llama-70b" in str(response.json()["fault"])
    assert not Incident.objects.exists() and not TrainingJob.objects.filter(name__startswith="rehearsal").exists()
