"""/policies/: one form per cost-policy kind, built from the parameters the kind declares; each saves a valid policy,
names the parameter at fault, and is refused to viewers."""

import pytest
from django.urls import reverse

from apps.costs.forms import CostPolicyForm
from apps.costs.models import CostPolicy
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node
from apps.workloads.models import InferenceService

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(db):
    load_cluster(ClusterShape(compute_nodes=2, nodes_per_rack=2, management_nodes=0))
    service = InferenceService.objects.create(name="chat", model="m", design_tokens_per_second=5000)
    service.nodes.set(Node.objects.filter(hostname__in=("gpu001", "gpu002")))
    return {"rack": Node.objects.get(hostname="gpu001").rack_id, "service": service.pk}


def good(kind: str, fleet) -> dict:
    return {
        "low_load_power": {
            "scope": "rack",
            "rack": fleet["rack"],
            "utilisation_below": 30,
            "window_minutes": 30,
            "power_limit_w": 450,
        },
        "elastic-scaling": {"service": fleet["service"], "threshold_up": 80, "threshold_down": 40, "max_replicas": 2},
        "spot-capacity": {"scope": "cluster", "spot_discount": 0.6, "window_minutes": 60},
        "storage_tiering": {"node": "gpu001", "source_path": "/scratch/ckpt", "age_days": 7},
    }[kind]


def _post(client, kind: str, name: str, fields: dict):
    data = {"kind": kind, f"{kind}-name": name, **{f"{kind}-{key}": value for key, value in fields.items()}}
    return client.post(reverse("policy-list"), data)


BAD = [
    # (kind, a bad value, the field named, what the kind's check says)
    ("low_load_power", {"power_limit_w": 5}, "power_limit_w", "power limit range"),
    ("low_load_power", {"restore_above": 20}, "restore_above", "Must be above utilisation_below"),
    ("elastic-scaling", {"max_replicas": 3}, "max_replicas", "chat has 2 nodes"),
    ("elastic-scaling", {"threshold_down": 90}, "threshold_down", "Must be below threshold_up"),
    ("spot-capacity", {"spot_discount": 1.5}, "spot_discount", ""),
    ("storage_tiering", {"source_path": "/checkpoints"}, "source_path", "not on a hot or warm tier volume"),
    ("storage_tiering", {"source_path": "relative/path"}, "source_path", "An absolute directory path"),
]


@pytest.mark.parametrize("kind", ["low_load_power", "elastic-scaling", "spot-capacity", "storage_tiering"])
def test_each_kind_saves_a_valid_policy_with_its_parameters(fleet, browser_as, operator, kind):
    saved = _post(browser_as(operator), kind, "p1", good(kind, fleet))

    assert saved.status_code == 302, saved.context["form"].errors
    policy = CostPolicy.objects.get()
    assert policy.kind == kind and policy.created_by == operator
    given = {key: value for key, value in good(kind, fleet).items() if key not in ("scope", "rack", "service")}
    assert {key: policy.parameters[key] for key in given} == given
    assert saved["Location"] == reverse("policy-detail", args=[policy.public_id])


def test_defaults_come_from_the_kind(fleet, browser_as, operator):
    assert _post(browser_as(operator), "elastic-scaling", "scale", {"service": fleet["service"]}).status_code == 302

    policy = CostPolicy.objects.get()
    assert (policy.scope, policy.service.name) == ("service", "chat")  # the kind's only scope, not asked for
    assert policy.parameters == {
        "threshold_up": 80.0,
        "threshold_down": 40.0,
        "window_minutes": 15,
        "cool_down_minutes": 30,
        "min_replicas": 1,
        "max_replicas": 2,  # the service's nodes
    }


@pytest.mark.parametrize(("kind", "change", "field", "message"), BAD)
def test_a_bad_value_is_named_by_its_parameter_and_saves_nothing(
    fleet, browser_as, operator, kind, change, field, message
):
    refused = _post(browser_as(operator), kind, "p1", {**good(kind, fleet), **change})

    assert refused.status_code == 200
    errors = refused.context["form"].errors
    assert list(errors) == [field] and message in " ".join(errors[field])
    assert f'id="id_{kind}-{field}"' in refused.content.decode()  # shown beside its own field
    assert not CostPolicy.objects.exists()


def test_a_kind_with_one_scope_asks_for_what_it_acts_on(fleet, browser_as, operator):
    refused = _post(browser_as(operator), "elastic-scaling", "scale", {"threshold_up": 80})

    assert list(refused.context["form"].errors) == ["service"] and not CostPolicy.objects.exists()
    form = CostPolicyForm(kind="elastic-scaling")
    assert "scope" not in form.fields and "rack" not in form.fields and form.fields["service"].required
    assert set(CostPolicyForm(kind="storage_tiering").fields) == {
        "name",
        "node",
        "source_path",
        "age_days",
        "min_size_mb",
        "max_files",
    }


def test_a_rack_scope_without_its_rack_is_named(fleet, browser_as, operator):
    fields = {**good("low_load_power", fleet), "rack": ""}

    refused = _post(browser_as(operator), "low_load_power", "night", fields)

    assert list(refused.context["form"].errors) == ["rack"]


def test_a_taken_name_is_refused(fleet, browser_as, operator):
    client = browser_as(operator)
    assert _post(client, "spot-capacity", "spot", good("spot-capacity", fleet)).status_code == 302

    refused = _post(client, "low_load_power", "spot", good("low_load_power", fleet))

    assert list(refused.context["form"].errors) == ["name"] and CostPolicy.objects.count() == 1


@pytest.mark.parametrize("kind", ["low_load_power", "elastic-scaling", "spot-capacity", "storage_tiering"])
def test_a_viewer_may_not_create_one(fleet, browser_as, viewer, kind):
    client = browser_as(viewer)

    assert _post(client, kind, "p1", good(kind, fleet)).status_code == 403
    assert not CostPolicy.objects.exists()
    assert 'name="kind"' not in client.get(reverse("policy-list")).content.decode()  # no forms shown


def test_an_unknown_kind_answers_400_naming_the_field(fleet, browser_as, operator):
    refused = browser_as(operator).post(reverse("policy-list"), {"kind": "cheaper", "cheaper-name": "x"})

    assert refused.status_code == 400 and refused.content.decode().startswith("kind:")
    assert not CostPolicy.objects.exists()


def test_the_page_offers_every_kind(fleet, browser_as, operator):
    page = browser_as(operator).get(reverse("policy-list")).content.decode()

    for kind in ("low_load_power", "elastic-scaling", "spot-capacity", "storage_tiering"):
        assert f'<input type="hidden" name="kind" value="{kind}">' in page
    assert 'name="elastic-scaling-threshold_up"' in page and 'name="spot-capacity-spot_discount"' in page


def test_the_rack_and_the_service_follow_the_scope(fleet, browser_as, operator):
    """A kind that acts on the cluster, a rack or a service asks for the rack only while the scope is a rack and for
    the service only while it is a service (static/js/kind_fields.js); both showed whatever scope was picked."""
    import re

    html = browser_as(operator).get(reverse("policy-list")).content.decode()
    power = html.split('id="new-low_load_power"')[1].split("</form>")[0]
    assert 'data-kind-field="low_load_power-scope"' in power
    assert re.search(r'<p data-shown-for="rack">\s*<label for="id_low_load_power-rack">', power)
    assert re.search(r'<p data-shown-for="service">\s*<label for="id_low_load_power-service">', power)
    scaling = html.split('id="new-elastic-scaling"')[1].split("</form>")[0]  # one scope: its service always shows
    assert "data-kind-field" not in scaling and "data-shown-for" not in scaling
    assert "js/kind_fields.js" in html


def test_the_pages_show_parameters_by_label_with_their_units(fleet, browser_as, operator, viewer):
    """A policy's parameters read "Power limit: 450 W", not "power_limit_w=450", on the list and on its page, and
    the form asks for them by the same words."""
    _post(browser_as(operator), "low_load_power", "quiet", good("low_load_power", fleet))
    _post(browser_as(operator), "storage_tiering", "cold", good("storage_tiering", fleet) | {"age_days": 1})
    power, tiering = CostPolicy.objects.get(name="quiet"), CostPolicy.objects.get(name="cold")
    listing = browser_as(viewer).get(reverse("policy-list")).content.decode()

    row = listing.split('data-policy="quiet"')[1].split("</tr>")[0]
    assert "Utilisation below: <strong>30 %</strong>" in row and "Window: <strong>30 min</strong>" in row
    assert "Power limit: <strong>450 W</strong>" in row and "power_limit_w" not in row
    row = listing.split('data-policy="cold"')[1].split("</tr>")[0]
    assert "Not read for: <strong>1 day</strong>" in row and "Files per action: <strong>1000 files</strong>" in row
    assert "Source directory: <strong>/scratch/ckpt</strong>" in row
    detail = browser_as(viewer).get(reverse("policy-detail", args=[power.public_id])).content.decode()
    assert "<dt>Power limit</dt><dd>450 W</dd>" in detail and "power_limit_w=" not in detail
    detail = browser_as(viewer).get(reverse("policy-detail", args=[tiering.public_id])).content.decode()
    assert "<dt>Smallest file</dt><dd>0 MB</dd>" in detail

    form = browser_as(operator).get(reverse("policy-list")).content.decode()
    assert '<label for="id_low_load_power-power_limit_w">Power limit (W):</label>' in form
