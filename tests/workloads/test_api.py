"""The workload endpoints: viewers read, operators write, bad input is a 400 naming the field and changes nothing."""

import pytest

from apps.inventory.models import Node
from apps.workloads import services
from apps.workloads.demo import load_workloads
from apps.workloads.models import InferenceService, TrainingJob

pytestmark = pytest.mark.django_db

JOB = {
    "name": "llama-sft",
    "framework": "pytorch",
    "launcher": "torchrun",
    "nodes": ["gpu003", "gpu001"],
    "ranks_per_node": 2,
    "checkpoint_dir": "/shared/ckpt/llama-sft",
    "checkpoint_tier": "Warm SAS SSD",
    "state": "running",
}
SERVICE = {
    "name": "embed",
    "model": "BAAI/bge-large-en",
    "endpoint": "http://embed.svc:8000/v1",
    "nodes": ["gpu010", "gpu011"],
    "design_tokens_per_second": 4000,
    "latency_target_ms": 50,
}


def test_anonymous_is_refused(api_client, demo_cluster):
    assert api_client.get("/api/training-jobs/").status_code in (401, 403)
    assert api_client.post("/api/inference-services/", SERVICE, format="json").status_code in (401, 403)


def test_a_viewer_reads_but_does_not_write(api_as, viewer, demo_cluster):
    load_workloads()
    client = api_as(viewer)
    services = client.get("/api/inference-services/").data["results"]
    assert [row["name"] for row in services] == ["chat-llama-70b"]
    assert [node["display"] for node in services[0]["nodes"]] == ["gpu001", "gpu002", "gpu003", "gpu004"]
    assert client.post("/api/training-jobs/", JOB, format="json").status_code == 403
    assert not TrainingJob.objects.filter(name="llama-sft").exists()


def test_an_operator_creates_a_job_and_reads_its_rank_map_in_node_rank_order(api_as, operator, demo_cluster):
    client = api_as(operator)
    response = client.post("/api/training-jobs/", JOB, format="json")
    assert response.status_code == 201, response.data
    assert [node["display"] for node in response.data["nodes"]] == ["gpu003", "gpu001"]
    assert response.data["world_size"] == 4
    assert response.data["rank_map"] == [
        {"rank": 0, "node": "gpu003", "gpu": 0},
        {"rank": 1, "node": "gpu003", "gpu": 1},
        {"rank": 2, "node": "gpu001", "gpu": 0},
        {"rank": 3, "node": "gpu001", "gpu": 1},
    ]
    url = f"/api/training-jobs/{response.data['id']}/"
    changed = client.patch(url, {"nodes": ["gpu001"]}, format="json")
    assert changed.status_code == 200, changed.data
    assert [row["node"] for row in changed.data["rank_map"]] == ["gpu001", "gpu001"]


@pytest.mark.parametrize(
    "field, value",
    [
        ("nodes", ["gpu001", "gpu001"]),
        ("nodes", ["no-such-node"]),
        ("checkpoint_dir", "ckpt; rm -rf /"),
        ("ranks_per_node", 0),
        ("state", "flying"),
    ],
)
def test_bad_job_input_names_the_field_and_changes_nothing(api_as, operator, demo_cluster, field, value):
    response = api_as(operator).post("/api/training-jobs/", {**JOB, field: value}, format="json")
    assert response.status_code == 400 and field in response.data, response.data
    assert not TrainingJob.objects.exists()


@pytest.mark.parametrize(
    "field, value",
    [("nodes", []), ("design_tokens_per_second", 0), ("endpoint", "not a url"), ("model", "llama\nfake")],
)
def test_bad_service_input_names_the_field(api_as, operator, demo_cluster, field, value):
    response = api_as(operator).post("/api/inference-services/", {**SERVICE, field: value}, format="json")
    assert response.status_code == 400 and field in response.data, response.data
    assert not InferenceService.objects.exists()


def test_an_operator_creates_a_service(api_as, operator, demo_cluster):
    response = api_as(operator).post("/api/inference-services/", SERVICE, format="json")
    assert response.status_code == 201, response.data
    service = InferenceService.objects.get(name="embed")
    assert sorted(service.nodes.values_list("hostname", flat=True)) == ["gpu010", "gpu011"]


def test_the_job_list_costs_the_same_queries_for_one_or_three_jobs(
    api_as, viewer, demo_cluster, django_assert_num_queries
):
    load_workloads()
    client = api_as(viewer)
    with django_assert_num_queries(5) as one:  # token, count, page (tiers joined), members, nodes
        assert client.get("/api/training-jobs/").data["count"] == 1
    for number in (1, 2):
        job = TrainingJob.objects.create(name=f"extra-{number}")
        services.set_training_nodes(job=job, nodes=list(Node.objects.filter(hostname__in=["gpu030", "gpu031"])))
    with django_assert_num_queries(5) as three:
        assert client.get("/api/training-jobs/").data["count"] == 3
    assert len(one.captured_queries) == len(three.captured_queries)


def test_filters_by_node_and_state(api_as, viewer, demo_cluster):
    load_workloads()
    client = api_as(viewer)
    assert client.get("/api/training-jobs/", {"node": "gpu010"}).data["count"] == 1
    assert client.get("/api/training-jobs/", {"node": "gpu001"}).data["count"] == 0
    assert client.get("/api/inference-services/", {"state": "stopped"}).data["count"] == 0


def test_deleting_a_training_job_an_incident_is_about_is_a_409_naming_them(api_as, operator, demo_cluster):
    from apps.diagnosis.models import Incident

    client = api_as(operator)
    assert client.post("/api/training-jobs/", JOB, format="json").status_code == 201
    job = TrainingJob.objects.get(name="llama-sft")
    Incident.objects.create(title="NCCL timeout", training_job=job)

    response = client.delete(f"/api/training-jobs/{job.public_id}/")

    assert response.status_code == 409, response.content[:300]
    assert "incidents" in response.json()["detail"] and "llama-sft" in response.json()["detail"]
    assert TrainingJob.objects.filter(pk=job.pk).exists()
    assert Incident.objects.get().training_job == job
