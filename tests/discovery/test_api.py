"""The discovery API: who may read and decide differences, filters, bad input, and starting a discover job."""

import pytest

from apps.core.models import AuditEntry
from apps.discovery import services
from apps.discovery.choices import DifferenceState
from apps.discovery.models import Difference, NodeFacts
from apps.inventory.models import Nic, Node
from apps.jobs.models import Job
from apps.jobs.services import TargetSpec

pytestmark = pytest.mark.django_db

URL = "/api/discovery/differences/"


@pytest.fixture
def mtu_difference(demo_cluster):
    job = services.start_discovery(targets=TargetSpec(nodes=("gpu016",)), transport="sim")
    node = Node.objects.get(hostname="gpu016")
    NodeFacts.objects.create(job=job, node=node, facts={"bios": {"version": "2.4.1"}})
    return Difference.objects.create(
        job=job, node=node, object_type="nic", object_key="ens1np0", field="mtu", expected="9000", discovered="1500"
    )


def test_anonymous_gets_401(api_client, mtu_difference):
    assert api_client.get(URL).status_code == 401
    assert api_client.post(f"{URL}{mtu_difference.public_id}/accept/").status_code == 401
    assert api_client.get("/api/discovery/facts/").status_code == 401


def test_a_viewer_reads_but_may_not_decide(api_as, viewer, mtu_difference):
    client = api_as(viewer)
    body = client.get(URL, {"node": "gpu016", "state": "open"}).json()
    assert body["count"] == 1
    row = body["results"][0]
    assert (row["node"], row["object_key"], row["field"], row["expected"], row["discovered"]) == (
        "gpu016",
        "ens1np0",
        "mtu",
        "9000",
        "1500",
    )
    assert client.post(f"{URL}{mtu_difference.public_id}/accept/").status_code == 403
    assert client.post(f"{URL}{mtu_difference.public_id}/dismiss/").status_code == 403
    assert Nic.objects.get(node__hostname="gpu016", name="ens1np0").mtu == 9000


def test_an_operator_accepts_and_the_inventory_follows(api_as, operator, mtu_difference):
    response = api_as(operator).post(f"{URL}{mtu_difference.public_id}/accept/")
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "accepted" and response.json()["decided_by"] == "operator"
    nic = Nic.objects.get(node__hostname="gpu016", name="ens1np0")
    assert nic.mtu == 1500
    entry = AuditEntry.objects.for_object(nic).first()
    assert entry.changes == {"mtu": [9000, 1500]} and entry.source == "api" and entry.actor == operator
    again = api_as(operator).post(f"{URL}{mtu_difference.public_id}/dismiss/")
    assert again.status_code == 400 and "already accepted" in again.json()["state"][0]


def test_an_operator_dismisses_and_nothing_changes(api_as, operator, mtu_difference):
    response = api_as(operator).post(f"{URL}{mtu_difference.public_id}/dismiss/")
    assert response.status_code == 200 and response.json()["state"] == "dismissed"
    assert Nic.objects.get(node__hostname="gpu016", name="ens1np0").mtu == 9000


def test_filters_and_bad_input(api_as, viewer, mtu_difference):
    client = api_as(viewer)
    assert client.get(URL, {"job": str(mtu_difference.job.public_id)}).json()["count"] == 1
    assert client.get(URL, {"node": "gpu001"}).json()["count"] == 0
    assert client.get(URL, {"state": "accepted"}).json()["count"] == 0
    assert client.get(URL, {"job": "not-a-uuid"}).status_code == 400
    assert client.get(URL, {"state": "maybe"}).status_code == 400
    assert client.get(f"{URL}00000000-0000-0000-0000-000000000000/").status_code == 404
    facts = client.get("/api/discovery/facts/", {"node": "gpu016"}).json()
    assert facts["count"] == 1 and facts["results"][0]["facts"]["bios"]["version"] == "2.4.1"
    assert client.get("/api/discovery/facts/", {"job": "nope"}).status_code == 400


def test_the_jobs_api_starts_a_discovery_with_the_data_nics_by_default(api_as, operator, viewer, demo_cluster):
    body = {"kind": "discover", "targets": {"nodes": ["gpu001", "gpu002"]}, "transport": "sim"}
    assert api_as(viewer).post("/api/jobs/", body, format="json").status_code == 403
    response = api_as(operator).post("/api/jobs/", body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["parameters"] == {"interfaces": [f"ens{k}np0" for k in range(1, 9)]}
    job = Job.objects.get(public_id=response.json()["id"])
    assert job.steps.filter(hostname="gpu001").count() == 8  # one column per fact family, all NICs in one


@pytest.mark.parametrize(
    "parameters, field",
    [
        ({"interfaces": ["eth0; reboot"]}, "interfaces"),
        ({"interfaces": ["ens1np0", "ens1np0"]}, "interfaces"),
        ({"interfaces": "ens1np0"}, "interfaces"),
        ({"depth": 3}, "depth"),
    ],
)
def test_bad_parameters_answer_400_naming_the_field(api_as, operator, demo_cluster, parameters, field):
    body = {"kind": "discover", "targets": {"nodes": ["gpu001"]}, "transport": "sim", "parameters": parameters}
    response = api_as(operator).post("/api/jobs/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()["parameters"]
    assert not Job.objects.filter(kind="discover").exists()


def test_states_of_the_list_are_the_choices(api_as, viewer, mtu_difference):
    Difference.objects.filter(pk=mtu_difference.pk).update(state=DifferenceState.FILLED)
    assert api_as(viewer).get(URL, {"state": "filled"}).json()["count"] == 1


def test_fix_node_over_the_api(api_as, viewer, operator, mtu_difference):
    from apps.deployments.models import Deployment

    assert api_as(viewer).post(f"{URL}{mtu_difference.public_id}/fix-node/").status_code == 403
    assert not Deployment.objects.exists()
    response = api_as(operator).post(f"{URL}{mtu_difference.public_id}/fix-node/")
    assert response.status_code == 201, response.json()
    deployment = Deployment.objects.get()
    body = response.json()
    assert body["deployment"] == str(deployment.public_id) and body["step"] == "mtu"
    assert body["job"] == str(deployment.latest_run.job.public_id) and body["name"].startswith("fix-mtu-gpu016-")
    assert api_as(operator).get(f"{URL}{mtu_difference.public_id}/").json()["state"] == "dismissed"
    again = api_as(operator).post(f"{URL}{mtu_difference.public_id}/fix-node/")
    assert again.status_code == 400 and "already dismissed" in again.json()["state"][0]
    assert Deployment.objects.count() == 1


@pytest.mark.parametrize(
    ("object_type", "object_key", "field", "discovered"),
    [("nic", "ens1np0", "mtu", "1500"), ("gpu", "GPU3", "serial", "1654922"), ("nic", "ens1np0", "peer_gpus", "")],
)
def test_accepting_a_difference_whose_object_was_deleted_is_a_clear_conflict(
    api_as, operator, demo_cluster, object_type, object_key, field, discovered
):
    job = services.start_discovery(targets=TargetSpec(nodes=("gpu016",)), transport="sim")
    node = Node.objects.get(hostname="gpu016")
    difference = Difference.objects.create(
        job=job, node=node, object_type=object_type, object_key=object_key, field=field, discovered=discovered
    )
    (node.nics.filter(name=object_key) if object_type == "nic" else node.gpus.filter(index=3)).delete()
    client = api_as(operator)
    audited = AuditEntry.objects.count()

    response = client.post(f"{URL}{difference.public_id}/accept/")

    assert response.status_code == 409, response.content[:300]
    assert object_key in response.json()["object_key"][0] and "deleted" in response.json()["object_key"][0]
    difference.refresh_from_db()
    assert difference.state == DifferenceState.OPEN and difference.decided_by is None
    assert AuditEntry.objects.count() == audited
