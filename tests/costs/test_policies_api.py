"""/api/cost-policies/ and /policies/: roles (anonymous, viewer, operator, admin), bad input naming the field with
nothing changed, and the page's dry run, approval and revert."""

import pytest
from django.urls import reverse

from apps.costs.choices import ActionState
from apps.costs.models import CostPolicy, PolicyAction
from apps.inventory.models import Node
from apps.simulator.models import SimChange
from tests import factories

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_the_simulator")]
URL = "/api/cost-policies/"
GOOD = {
    "name": "night",
    "scope": "service",
    "service": "chat",
    "parameters": {"power_limit_w": 450, "utilisation_below": 80, "window_minutes": 30},
}


@pytest.fixture
def fleet(db):
    return factories.make_serving_fleet()


def test_reading_needs_a_login_and_writing_an_operator(fleet, api_client, api_as, viewer, operator):
    assert api_client.get(URL).status_code in (401, 403)
    assert api_as(viewer).get(URL).status_code == 200
    assert api_as(viewer).post(URL, GOOD, format="json").status_code == 403
    created = api_as(operator).post(URL, GOOD, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["service"] == "chat" and body["parameters"]["restore_above"] == 100.0 and not body["standing_approval"]
    assert api_as(viewer).get(URL, {"colour": "red"}).status_code == 400  # unknown query parameter


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"parameters": {**GOOD["parameters"], "utilisation_below": 120}}, ("parameters", "utilisation_below")),
        ({"parameters": {**GOOD["parameters"], "window_minutes": 0}}, ("parameters", "window_minutes")),
        ({"parameters": {**GOOD["parameters"], "power_limit_w": 150}}, ("parameters", "power_limit_w")),
        ({"parameters": {**GOOD["parameters"], "restore_above": 50}}, ("parameters", "restore_above")),
        ({"scope": "rack"}, ("rack",)),
        ({"standing_approval": True}, ("standing_approval",)),
        ({"service": "no-such-service"}, ("service",)),
    ],
)
def test_bad_input_names_the_field_and_changes_nothing(fleet, api_as, operator, change, path):
    response = api_as(operator).post(URL, {**GOOD, **change}, format="json")
    assert response.status_code == 400
    body = response.json()
    for key in path:
        assert key in body, body
        body = body[key]
    assert not CostPolicy.objects.exists()


def test_the_power_limit_message_names_the_skus_range(fleet, api_as, operator):
    response = api_as(operator).post(
        URL, {**GOOD, "parameters": {**GOOD["parameters"], "power_limit_w": 701}}, format="json"
    )
    assert response.json()["parameters"]["power_limit_w"] == [
        "701 W is outside the H200 SXM's power limit range, 200–700 W."
    ]


def test_an_admin_gives_standing_approval(fleet, api_as, operator, admin):
    policy = api_as(operator).post(URL, GOOD, format="json").json()
    detail = f"{URL}{policy['id']}/"
    refused = api_as(operator).patch(detail, {"standing_approval": True}, format="json")
    assert refused.status_code == 400 and "standing_approval" in refused.json()
    assert api_as(admin).patch(detail, {"standing_approval": True}, format="json").json()["standing_approval"]


def test_dry_run_approve_apply_revert_over_the_api(fleet, api_as, viewer, operator):
    policy = api_as(operator).post(URL, GOOD, format="json").json()
    detail = f"{URL}{policy['id']}/"
    assert api_as(viewer).post(f"{detail}dry-run/").status_code == 403
    assert api_as(operator).post(f"{detail}approve/", {}, format="json").json() == {
        "action": ["No action of this policy to approve."]
    }
    proposal = api_as(operator).post(f"{detail}dry-run/")
    assert proposal.status_code == 201
    action = proposal.json()
    assert action["state"] == "proposed" and action["commands"]["gpu001"][0] == "nvidia-smi -i 0 -pl 450"
    assert action["expected_kwh_per_day"] > 0 and action["currency"] == "EUR"
    assert api_as(viewer).post(f"{detail}approve/", {}, format="json").status_code == 403
    early = api_as(operator).post(f"{detail}revert/", {"action": action["id"]}, format="json")
    assert early.status_code == 400 and "state" in early.json()
    approved = api_as(operator).post(f"{detail}approve/", {"action": action["id"]}, format="json").json()
    assert approved["state"] == "approved" and approved["approved_by"] == "operator"
    applying = api_as(operator).post(f"{detail}apply/", {}, format="json").json()
    assert applying["state"] == "applying" and applying["apply_job"]
    listed = api_as(viewer).get("/api/policy-actions/", {"policy": "night"}).json()
    assert [row["id"] for row in listed["results"]] == [action["id"]]
    assert not SimChange.objects.exists()  # the job has not run: nothing changed on the nodes yet


def test_the_page_dry_runs_approves_and_shows_the_commands(fleet, browser_as, operator, viewer):
    page = browser_as(viewer).get(reverse("policy-list"))
    assert page.status_code == 200 and b'href="/policies/"' in page.content  # in the top bar
    policy = CostPolicy.objects.create(
        name="night",
        kind="low_load_power",
        scope="service",
        service=fleet,
        parameters={**GOOD["parameters"], "restore_above": 100.0},
    )
    step = reverse("policy-step", args=[policy.public_id, "dry-run"])
    assert browser_as(viewer).post(step).status_code == 403
    client = browser_as(operator)
    assert client.post(step).status_code == 302
    action = PolicyAction.objects.get()
    shown = client.get(reverse("policy-detail", args=[policy.public_id])).content.decode()
    assert "nvidia-smi -i 0 -pl 450" in shown and "nvidia-smi -i 0 -pl 700" in shown and "kWh/day" in shown
    client.post(reverse("policy-step", args=[policy.public_id, "approve"]), {"action": action.public_id})
    action.refresh_from_db()
    assert action.state == ActionState.APPROVED and action.approved_by == operator


def test_the_page_creates_a_policy_and_names_a_bad_field(fleet, browser_as, operator):
    client = browser_as(operator)
    fields = {"name": "night", "scope": "cluster", "utilisation_below": 30, "window_minutes": 0, "power_limit_w": 450}
    data = {"kind": "low_load_power", **{f"low_load_power-{name}": value for name, value in fields.items()}}
    refused = client.post(reverse("policy-list"), data)
    assert refused.status_code == 200 and "window_minutes" in refused.context["form"].errors
    assert not CostPolicy.objects.exists()
    assert client.post(reverse("policy-list"), {**data, "low_load_power-window_minutes": 30}).status_code == 302
    assert CostPolicy.objects.get().parameters["window_minutes"] == 30


@pytest.mark.django_db(transaction=True)
def test_the_demo_path_on_the_page_dry_run_approve_apply_revert(fleet, browser_as, operator, run_shards):
    from apps.simulator import services as simulator

    policy = CostPolicy.objects.create(
        name="night",
        kind="low_load_power",
        scope="service",
        service=fleet,
        parameters={**GOOD["parameters"], "restore_above": 100.0},
    )
    client = browser_as(operator)

    def press(step, action=None):
        data = {"action": str(action.public_id)} if action else {}
        response = client.post(reverse("policy-step", args=[policy.public_id, step]), data)
        assert response.status_code == 302
        return PolicyAction.objects.get(policy=policy, state__in=("proposed", "approved", "applying", "reverting"))

    action = press("dry-run")
    action = press("approve", action)
    action = press("apply", action)
    run_shards(action.apply_job)
    state = simulator.node_state(node=Node.objects.get(hostname="gpu001"))
    assert {gpu.power_cap_w for gpu in state.gpus} == {450}
    action = press("revert", PolicyAction.objects.get(state="applied"))
    run_shards(action.revert_job)
    action.refresh_from_db()
    page = client.get(reverse("policy-detail", args=[policy.public_id])).content.decode()
    assert action.state == ActionState.REVERTED and 'data-state="reverted"' in page
    state = simulator.node_state(node=Node.objects.get(hostname="gpu001"))
    assert {gpu.power_cap_w for gpu in state.gpus} == {700}
