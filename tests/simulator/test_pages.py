"""/simulator/: everyone logged in sees the faults; operators inject and clear them."""

import pytest

from apps.simulator import services
from apps.simulator.models import SimFault


def beside(response, name: str) -> str:
    """What the inject form shows inside the label of the field named `name`, after the field: its errors."""
    return response.content.decode().split(f'name="{name}"', 1)[1].split("</label>", 1)[0]


def test_login_required(client, demo_cluster):
    response = client.get("/simulator/")
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_viewer_sees_faults_but_no_form(browser_as, viewer, gpu_node):
    services.inject_fault(node=gpu_node, kind="xid79", target="3")
    page = browser_as(viewer).get("/simulator/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "GPU fallen off the bus (XID 79)" in html and "gpu001" in html
    assert "<td>GPU 3 has fallen off the bus (XID 79)</td>" in html  # the fault in words, not its codes
    assert 'id="inject-form"' not in html
    assert browser_as(viewer).post("/simulator/faults/", {"node": "gpu001", "kind": "mtu"}).status_code == 403


def test_operator_injects_from_the_form_and_clears(browser_as, operator, gpu_node):
    client = browser_as(operator)
    assert 'id="inject-form"' in client.get("/simulator/").content.decode()
    response = client.post("/simulator/faults/", {"node": "gpu001", "kind": "thermal", "target": "2"})
    assert response.status_code == 302
    fault = SimFault.objects.get()
    assert (fault.kind, fault.target, fault.created_by) == ("thermal", "2", operator)
    assert "gpu001: GPU 2 slowed down by heat at 92 °C injected." in client.get("/simulator/").content.decode()
    assert client.post(f"/simulator/faults/{fault.public_id}/clear/").status_code == 302
    assert not SimFault.objects.exists()
    assert "gpu001: GPU 2 slowed down by heat at 92 °C cleared." in client.get("/simulator/").content.decode()


def test_form_errors_are_shown(browser_as, operator, gpu_node):
    response = browser_as(operator).post("/simulator/faults/", {"node": "gpu001", "kind": "xid79", "target": "42"})
    assert response.status_code == 400
    assert "gpu001 has no GPU &#x27;42&#x27;" in response.content.decode()


def test_the_node_is_typed_with_the_simulated_nodes_offered_and_an_unknown_one_is_a_form_error(
    browser_as, operator, demo_cluster
):
    """A fleet's thousands of nodes are not a select: a host name field with the nodes that have GPUs in a datalist."""
    client = browser_as(operator)
    html = client.get("/simulator/").content.decode()
    assert 'list="simulated-nodes"' in html and '<option value="gpu032">' in html
    assert '<option value="mgmt01">' not in html  # no GPUs: the simulator does not answer for it
    response = client.post("/simulator/faults/", {"node": "mgmt01", "kind": "mtu"})
    assert response.status_code == 400
    assert "No simulated node of that name" in beside(response, "node")
    assert not SimFault.objects.exists()


def test_clear_a_whole_node(browser_as, operator, gpu_node):
    services.inject_fault(node=gpu_node, kind="mtu")
    services.inject_fault(node=gpu_node, kind="straggler")
    assert browser_as(operator).post("/simulator/nodes/gpu001/clear/").status_code == 302
    assert not SimFault.objects.exists()


@pytest.mark.parametrize(
    ("kind", "target"), [("xid79", "²"), ("xid79", "٣"), ("ecc", "３"), ("pfc_off", "٣"), ("pfc_off", "²")]
)
def test_a_target_in_other_digits_is_a_form_error_and_stores_nothing(browser_as, operator, gpu_node, kind, target):
    response = browser_as(operator).post("/simulator/faults/", {"node": "gpu001", "kind": kind, "target": target})
    assert response.status_code == 400
    assert 'class="error"' in beside(response, "target")
    assert not SimFault.objects.exists()


def test_the_page_and_the_api_filter_faults_alike(browser_as, api_as, viewer, demo_cluster, gpu_node):
    from apps.inventory.models import Node

    services.inject_fault(node=gpu_node, kind="xid79", target="3")
    services.inject_fault(node=gpu_node, kind="mtu")
    services.inject_fault(node=Node.objects.get(hostname="gpu002"), kind="xid79", target="1")
    page, api = browser_as(viewer), api_as(viewer)
    for query, shown in [
        ({"kind": "xid79"}, {("gpu001", "3"), ("gpu002", "1")}),
        ({"node": "gpu001"}, {("gpu001", "3"), ("gpu001", "ens1np0")}),
        ({"node": "gpu002", "kind": ["xid79", "mtu"]}, {("gpu002", "1")}),
    ]:
        rows = page.get("/simulator/", query).context["faults"]
        assert {(fault.node.hostname, fault.target) for fault in rows} == shown, query
        listed = api.get("/api/sim/faults/", query).json()["results"]
        assert {(fault["node"], fault["target"]) for fault in listed} == shown, query
    assert 'id="fault-filters"' in page.get("/simulator/").content.decode()


def test_the_inject_form_takes_the_faults_parameters(browser_as, operator, gpu_node):
    """An MTU value, a cable's rate and CRC rate (a CRC-only cable could be made only over the API) are fields of
    the form, each shown for the kinds that take it; left empty, a parameter takes its kind's default (issue 27)."""
    client = browser_as(operator)
    html = client.get("/simulator/").content.decode()
    assert 'data-shown-for="mtu"' in html and 'name="parameter_mtu"' in html
    assert 'data-shown-for="degraded_cable"' in html and 'name="parameter_crc_per_million"' in html
    nic = gpu_node.nics.filter(rdma_capable=True).order_by("name").first().name
    crc_only = {"node": "gpu001", "kind": "degraded_cable", "target": nic}
    crc_only |= {"parameter_rate_gbps": "0", "parameter_crc_per_million": "500", "parameter_mtu": "4200"}
    assert client.post("/simulator/faults/", crc_only).status_code == 302
    fault = SimFault.objects.get(kind="degraded_cable")
    assert fault.parameters == {"rate_gbps": 0, "crc_per_million": 500}  # another kind's field is not its parameter
    mtu = client.post("/simulator/faults/", {"node": "gpu001", "kind": "mtu", "parameter_mtu": "4200"})
    assert mtu.status_code == 302
    assert SimFault.objects.get(kind="mtu").parameters == {"mtu": 4200}
    bad = client.post("/simulator/faults/", {"node": "gpu001", "kind": "thermal", "parameter_temperature": "500"})
    assert bad.status_code == 400 and "Must be a whole number from 80 to 110" in bad.content.decode()
    assert not SimFault.objects.filter(kind="thermal").exists()


def test_each_parameter_is_labelled_in_words_with_its_unit():
    """ "Rate gbps" and "Crc per million" were the code's names; a CRC-only cable is a rate of 0, said on the field."""
    from apps.simulator.forms import PARAMETER_KINDS, PARAMETER_LABELS, FaultForm

    assert set(PARAMETER_KINDS) <= set(PARAMETER_LABELS)
    form = FaultForm()
    assert form.fields["parameter_rate_gbps"].label.startswith("link rate, Gb/s (0: the cable keeps its rate")
    assert form.fields["parameter_mtu"].label == "MTU (bytes)"


def test_the_form_names_every_bad_field_at_once(browser_as, operator, gpu_node):
    """The form's refusals (a lane count not a number) beside the fault's checks (no GPU 42, PCIe gen 9)."""
    form = {"node": "gpu001", "kind": "pcie_downtrained", "target": "42", "parameter_gen": "9", "parameter_width": "x"}
    response = browser_as(operator).post("/simulator/faults/", form)

    assert response.status_code == 400
    errors = response.context["form"].errors
    assert set(errors) == {"parameter_width", "parameter_gen", "target"}, errors
    assert "no GPU" in str(errors["target"]) and "from 1 to 5, not 9" in str(errors["parameter_gen"])
    assert not SimFault.objects.exists()


def test_each_parameter_error_shows_on_its_own_field(browser_as, operator, gpu_node):
    """A cable's rate and CRC rate out of range: each message beside its field (MTU value, cable rate, CRC rate...),
    not in a list of code names above the form."""
    nic = gpu_node.nics.filter(rdma_capable=True).order_by("name").first().name
    form = {"node": "gpu001", "kind": "degraded_cable", "target": nic}
    form |= {"parameter_rate_gbps": "9999", "parameter_crc_per_million": "-1"}
    response = browser_as(operator).post("/simulator/faults/", form)

    assert response.status_code == 400
    assert "from 0 to 800, not 9999" in beside(response, "parameter_rate_gbps")
    assert "from 0 to 100000, not -1" in beside(response, "parameter_crc_per_million")
    assert "rate_gbps:" not in response.content.decode() and "crc_per_million:" not in response.content.decode()
    assert not SimFault.objects.exists()
