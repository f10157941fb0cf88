"""/api/sim/faults/: viewers read, operators inject and clear, bad input is a 400 naming the field."""

import pytest

from apps.simulator.models import SimFault

URL = "/api/sim/faults/"


def test_anonymous_is_refused(api_client, demo_cluster):
    assert api_client.get(URL).status_code == 401
    assert api_client.post(URL, {"node": "gpu001", "kind": "mtu"}, format="json").status_code == 401


def test_viewer_reads_but_cannot_inject_or_clear(api_as, viewer, gpu_node):
    from apps.simulator import services

    fault = services.inject_fault(node=gpu_node, kind="mtu")
    client = api_as(viewer)
    listing = client.get(URL)
    assert listing.status_code == 200
    assert listing.json()["results"][0]["node"] == "gpu001"
    assert client.post(URL, {"node": "gpu001", "kind": "ecc"}, format="json").status_code == 403
    assert client.delete(f"{URL}{fault.public_id}/").status_code == 403
    assert SimFault.objects.count() == 1


def test_operator_injects_and_clears(api_as, operator, gpu_node):
    client = api_as(operator)
    created = client.post(URL, {"node": "gpu001", "kind": "nic_down", "target": "ens4np0"}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["node"] == "gpu001" and body["kind"] == "nic_down" and body["target"] == "ens4np0"
    assert body["created_by"] == "operator"
    defaulted = client.post(URL, {"node": "gpu001", "kind": "pcie_downtrained"}, format="json").json()
    assert defaulted["target"] == "0" and defaulted["parameters"] == {"gen": 3, "width": 8}
    assert client.get(f"{URL}{body['id']}/").json()["kind"] == "nic_down"
    assert client.get(URL, {"kind": "nic_down"}).json()["count"] == 1
    assert client.delete(f"{URL}{body['id']}/").status_code == 204
    assert list(SimFault.objects.values_list("kind", flat=True)) == ["pcie_downtrained"]


def test_bad_input_is_a_400_naming_the_field(api_as, operator, gpu_node):
    client = api_as(operator)
    cases = [
        ({"node": "gpu999", "kind": "mtu"}, "node"),
        ({"node": "gpu001", "kind": "meltdown"}, "kind"),
        ({"node": "gpu001", "kind": "xid79", "target": "12"}, "target"),
        ({"node": "gpu001", "kind": "mtu", "parameters": {"mtu": "big"}}, "parameters"),
        ({"node": "gpu001", "kind": "mtu", "parameters": [1]}, "parameters"),
        ({"kind": "mtu"}, "node"),
    ]
    for payload, field in cases:
        response = client.post(URL, payload, format="json")
        assert response.status_code == 400, (payload, response.content)
        assert field in response.json(), (payload, response.json())
    client.post(URL, {"node": "gpu001", "kind": "mtu"}, format="json")
    again = client.post(URL, {"node": "gpu001", "kind": "mtu"}, format="json")
    assert again.status_code == 400 and "target" in again.json()


def test_schema_lists_the_endpoint(api_as, viewer, demo_cluster):
    schema = api_as(viewer).get("/api/schema/", HTTP_ACCEPT="application/json").content.decode()
    assert "/api/sim/faults/" in schema


@pytest.mark.parametrize(
    ("kind", "target"), [("xid79", "²"), ("xid79", "٣"), ("thermal", "３"), ("pfc_off", "٣"), ("pfc_off", "¹")]
)
def test_a_target_in_other_digits_is_a_400_naming_the_target(api_as, operator, gpu_node, kind, target):
    response = api_as(operator).post(URL, {"node": "gpu001", "kind": kind, "target": target}, format="json")
    assert response.status_code == 400, response.content
    assert "target" in response.json()
    assert not SimFault.objects.exists()


def test_every_bad_field_is_named_at_once(api_as, operator, gpu_node):
    """A target the node lacks no longer hides the parameters out of range, nor a node or target refused by its
    shape what the fault's checks say of the parameters (each bad one named)."""
    client = api_as(operator)
    bad = {"gen": 9, "width": 99}
    cases = [
        ({"node": "gpu001", "target": "42"}, {"target", "parameters"}),
        ({"node": "gpu999"}, {"node", "parameters"}),
        ({"node": "gpu001", "target": "0" * 256}, {"target", "parameters"}),
    ]
    for fields, named in cases:
        response = client.post(URL, {"kind": "pcie_downtrained", "parameters": bad, **fields}, format="json")
        assert response.status_code == 400 and set(response.json()) == named, (fields, response.json())
        assert set(response.json()["parameters"]) == {"gen", "width"}, response.json()
    assert not SimFault.objects.exists()


def test_each_bad_parameter_is_named_under_parameters(api_as, operator, gpu_node):
    """`parameters` holds each bad parameter's messages under its name (a flat list made a client parse the names out
    of the sentences); parameters that are no object at all stay one message."""
    client = api_as(operator)
    body = {"node": "gpu001", "kind": "degraded_cable", "parameters": {"rate_gbps": 9999, "crc_per_million": -1}}
    body["parameters"] |= {"speed": 1}
    answer = client.post(URL, body, format="json")
    assert answer.status_code == 400 and set(answer.json()) == {"parameters"}, answer.json()
    problems = answer.json()["parameters"]
    assert set(problems) == {"rate_gbps", "crc_per_million", "speed"}, problems
    assert problems["crc_per_million"] == ["Must be a whole number from 0 to 100000, not -1."], problems
    assert "takes crc_per_million, rate_gbps, not speed" in problems["speed"][0], problems
    not_an_object = client.post(URL, {"node": "gpu001", "kind": "mtu", "parameters": [1]}, format="json")
    assert not_an_object.status_code == 400 and isinstance(not_an_object.json()["parameters"], list)
    assert not SimFault.objects.exists()
