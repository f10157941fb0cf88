"""/api/cost-policies/ and /policies/ for the elastic-scaling and spot-capacity kinds: bad parameters answer 400
naming the field (nothing saved), viewers cannot approve, the action carries its plan and validated artefacts, and
the policy page offers them as downloads."""

import datetime as dt

import pytest
import yaml
from django.urls import reverse
from django.utils import timezone

from apps.costs.models import CostPolicy
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node
from apps.workloads.models import InferenceService

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_the_simulator")]
URL = "/api/cost-policies/"
SCALING = {
    "name": "elastic",
    "kind": "elastic-scaling",
    "scope": "service",
    "service": "chat",
    "parameters": {"threshold_up": 80, "threshold_down": 79, "window_minutes": 15},
}


@pytest.fixture
def fleet(clock, db):
    load_cluster(ClusterShape(compute_nodes=3, nodes_per_rack=3, management_nodes=0))
    service = InferenceService.objects.create(name="chat", model="m", design_tokens_per_second=5000)
    service.nodes.set(Node.objects.filter(hostname__in=("gpu001", "gpu002", "gpu003")))
    two_hours_ago = timezone.now() - dt.timedelta(hours=2)
    InferenceService.objects.update(created=two_hours_ago)
    Node.objects.update(created=two_hours_ago - dt.timedelta(hours=1))
    return service


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"parameters": {**SCALING["parameters"], "threshold_up": 150}}, ("parameters", "threshold_up")),
        ({"parameters": {**SCALING["parameters"], "threshold_down": 80}}, ("parameters", "threshold_down")),
        ({"parameters": {**SCALING["parameters"], "max_replicas": 4}}, ("parameters", "max_replicas")),
        ({"parameters": {**SCALING["parameters"], "min_replicas": 0}}, ("parameters", "min_replicas")),
        ({"parameters": {**SCALING["parameters"], "cool_down_minutes": -1}}, ("parameters", "cool_down_minutes")),
        ({"parameters": {**SCALING["parameters"], "power_limit_w": 450}}, ("parameters", "power_limit_w")),
        ({"scope": "cluster", "service": None}, ("scope",)),
        ({"kind": "spot-capacity", "parameters": {"spot_discount": 1.5}}, ("parameters", "spot_discount")),
    ],
)
def test_bad_parameters_answer_400_naming_the_field(fleet, api_as, operator, change, path):
    response = api_as(operator).post(URL, {**SCALING, **change}, format="json")
    assert response.status_code == 400, response.json()
    body = response.json()
    for key in path:
        assert key in body, body
        body = body[key]
    assert not CostPolicy.objects.exists()


def test_the_action_carries_its_plan_and_artefacts_and_a_viewer_cannot_approve(fleet, api_as, operator, viewer):
    created = api_as(operator).post(URL, SCALING, format="json")
    assert created.status_code == 201, created.json()
    policy = created.json()
    assert policy["parameters"]["max_replicas"] == 3 and policy["parameters"]["cool_down_minutes"] == 30

    assert api_as(viewer).post(f"{URL}{policy['id']}/dry-run/").status_code == 403
    InferenceService.objects.update(replicas=1)  # one node for the whole demand: busy all day, at any hour
    proposed = api_as(operator).post(f"{URL}{policy['id']}/dry-run/")
    assert proposed.status_code == 201, proposed.json()
    action = proposed.json()
    assert action["plan"][0]["direction"] == "out" and action["plan"][0]["replicas_before"] == 1
    kinds = {item["name"]: yaml.safe_load(item["content"])["kind"] for item in action["artefacts"]}
    assert kinds == {"keda-scaledobject": "ScaledObject", "hpa": "HorizontalPodAutoscaler"}

    assert api_as(viewer).post(f"{URL}{policy['id']}/approve/", {}, format="json").status_code == 403
    approved = api_as(operator).post(f"{URL}{policy['id']}/approve/", {}, format="json")
    assert approved.status_code == 200 and approved.json()["state"] == "approved"
    applied = api_as(operator).post(f"{URL}{policy['id']}/apply/", {}, format="json")
    assert applied.status_code == 200 and applied.json()["state"] == "applied"
    assert InferenceService.objects.get().replicas == action["plan"][0]["replicas_after"] == 2
    reverted = api_as(operator).post(f"{URL}{policy['id']}/revert/", {}, format="json")
    assert reverted.status_code == 200 and reverted.json()["state"] == "reverted"
    assert InferenceService.objects.get().replicas == 1


def test_the_policy_page_offers_the_artefacts_as_downloads(fleet, client, operator, viewer):
    policy = CostPolicy.objects.create(
        name="elastic",
        kind="elastic-scaling",
        scope="service",
        service=fleet,
        parameters={**SCALING["parameters"], "cool_down_minutes": 30, "min_replicas": 1, "max_replicas": 3},
    )
    InferenceService.objects.update(replicas=1)
    client.force_login(operator)
    assert client.post(reverse("policy-step", args=[policy.public_id, "dry-run"])).status_code == 302
    action = policy.actions.get()
    page = client.get(reverse("policy-detail", args=[policy.public_id])).content.decode()
    url = reverse("policy-artefact", args=[policy.public_id, action.public_id, "keda-scaledobject"])
    assert url in page and "chat-hpa.yaml" in page

    client.force_login(viewer)  # reading is for every signed-in user
    download = client.get(url)
    assert download.status_code == 200 and download["Content-Type"] == "application/yaml"
    assert 'filename="chat-scaledobject.yaml"' in download["Content-Disposition"]
    assert yaml.safe_load(download.content)["kind"] == "ScaledObject"
    assert client.get(url.replace("keda-scaledobject", "nothing")).status_code == 404
    refused = client.post(reverse("policy-step", args=[policy.public_id, "approve"]), {"action": action.public_id})
    assert refused.status_code == 403
    action.refresh_from_db()
    assert action.state == "proposed"  # the viewer's approve was refused
