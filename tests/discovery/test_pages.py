"""Discovery pages: the list with its Discover button, the results page with accept / dismiss / accept all."""

import pytest

from apps.discovery import services
from apps.discovery.choices import DifferenceState
from apps.discovery.models import Difference, NodeFacts
from apps.inventory.models import Nic, Node
from apps.jobs.models import Job
from apps.jobs.services import TargetSpec

pytestmark = pytest.mark.django_db


@pytest.fixture
def results(demo_cluster):
    job = services.start_discovery(targets=TargetSpec(nodes=("gpu016",)), transport="sim")
    node = Node.objects.get(hostname="gpu016")
    NodeFacts.objects.create(
        job=job,
        node=node,
        facts={"bios": {"version": "2.4.1"}},
        could_not_run={"qos:ens3np0": "mlnx_qos is not installed (not found on the node)"},
    )
    mtu = Difference.objects.create(
        job=job, node=node, object_type="nic", object_key="ens1np0", field="mtu", expected="9000", discovered="1500"
    )
    link = Difference.objects.create(
        job=job, node=node, object_type="nic", object_key="ens2np0", field="link_up", expected="up", discovered="down"
    )
    return job, mtu, link


def test_the_list_shows_jobs_with_open_counts_and_the_button_only_to_operators(browser_as, viewer, operator, results):
    job, _, _ = results
    page = browser_as(viewer).get("/discovery/")
    assert page.status_code == 200
    text = page.content.decode()
    assert f"/discovery/jobs/{job.public_id}/" in text and '<span class="badge red">2</span>' in text
    assert 'id="discover-form"' not in text
    assert 'id="discover-form"' in browser_as(operator).get("/discovery/").content.decode()


def test_the_discover_form_shows_the_chosen_scopes_input_only(browser_as, operator):
    """A rack, a tag or names: each input follows the scope (static/js/kind_fields.js); all three showed always."""
    html = browser_as(operator).get("/discovery/").content.decode()
    form = html.split('id="discover-form" data-kind-field="scope">')[1].split("</form>")[0]
    assert '<label data-shown-for="rack">Rack <select name="rack"' in form
    assert '<label data-shown-for="tag">Tag <select name="tag"' in form
    assert '<label data-shown-for="nodes">Host names <input type="text" name="nodes"' in form
    assert "js/kind_fields.js" in html


def test_the_discover_button_starts_a_job_for_a_rack(browser_as, viewer, operator, demo_cluster):
    data = {"scope": "rack", "rack": "r01", "transport": "sim"}
    assert browser_as(viewer).post("/discovery/start/", data).status_code == 403
    response = browser_as(operator).post("/discovery/start/", data)
    job = Job.objects.get(kind="discover")
    assert response.status_code == 302 and response.url == f"/jobs/{job.public_id}/"
    assert job.node_count == 8 and job.parameters["interfaces"][0] == "ens1np0" and job.requested_by == operator
    missing = browser_as(operator).post("/discovery/start/", {"scope": "rack", "transport": "sim"})
    assert missing.status_code == 400 and "Choose a rack." in missing.content.decode()


def test_the_results_page_shows_differences_and_could_not_run(browser_as, viewer, operator, results):
    job, mtu, _ = results
    text = browser_as(viewer).get(f"/discovery/jobs/{job.public_id}/").content.decode()
    assert "ens1np0" in text and "1500" in text and "mlnx_qos is not installed" in text
    assert f"/discovery/differences/{mtu.public_id}/accept/" not in text  # viewers see no buttons
    text = browser_as(operator).get(f"/discovery/jobs/{job.public_id}/").content.decode()
    assert (
        f"/discovery/differences/{mtu.public_id}/accept/" in text
        and "Update the inventory to all of this node's" in text
    )


def test_accept_dismiss_and_accept_all_from_the_page(browser_as, viewer, operator, results):
    job, mtu, link = results
    assert browser_as(viewer).post(f"/discovery/differences/{mtu.public_id}/accept/").status_code == 403
    client = browser_as(operator)
    assert client.post(f"/discovery/differences/{link.public_id}/dismiss/").status_code == 302
    assert Nic.objects.get(node__hostname="gpu016", name="ens2np0").link_up is True
    response = client.post(f"/discovery/jobs/{job.public_id}/nodes/gpu016/accept-all/")
    assert response.status_code == 302
    mtu.refresh_from_db()
    assert mtu.state == DifferenceState.ACCEPTED and mtu.decided_by == operator
    assert Nic.objects.get(node__hostname="gpu016", name="ens1np0").mtu == 1500
    link.refresh_from_db()
    assert link.state == DifferenceState.DISMISSED  # accept all touches only open ones


def test_the_results_page_highlights_only_discovery_in_the_top_bar(browser_as, viewer, results):
    """Its address (/discovery/jobs/...) names a job too; the bar still highlights one section, Discovery."""
    import re

    job, _, _ = results
    text = browser_as(viewer).get(f"/discovery/jobs/{job.public_id}/").content.decode()
    nav = text[text.index("<nav>") : text.index("</nav>")]
    assert re.findall(r'<a href="[^"]*" class="active"[^>]*>([^<]*)</a>', nav) == ["Discovery"]


def test_a_wrong_mtu_offers_both_directions_and_only_where_a_step_fixes_the_node(browser_as, operator, results):
    job, mtu, link = results
    text = browser_as(operator).get(f"/discovery/jobs/{job.public_id}/").content.decode()
    assert f"/discovery/differences/{mtu.public_id}/fix-node/" in text
    assert "The node is wrong — fix it" in text and "The inventory is wrong — update it" in text
    assert f"/discovery/differences/{link.public_id}/fix-node/" not in text  # no step brings a link up


def test_fixing_the_node_keeps_the_inventory_and_starts_an_approved_remediation(browser_as, viewer, operator, results):
    from apps.deployments.models import Approval, Deployment

    job, mtu, link = results
    assert browser_as(viewer).post(f"/discovery/differences/{mtu.public_id}/fix-node/").status_code == 403
    assert not Deployment.objects.exists()

    response = browser_as(operator).post(f"/discovery/differences/{mtu.public_id}/fix-node/")
    deployment = Deployment.objects.get()
    assert response.status_code == 302 and response.url == f"/deployments/{deployment.public_id}/"
    mtu.refresh_from_db()
    assert mtu.state == DifferenceState.DISMISSED and mtu.decided_by == operator
    assert Nic.objects.get(node__hostname="gpu016", name="ens1np0").mtu == 9000  # the inventory was right
    assert list(deployment.nodes.values_list("hostname", flat=True)) == ["gpu016"]
    assert deployment.state == "running" and deployment.transport == "sim"
    step = Approval.objects.get(deployment=deployment, scope="step")
    assert step.step == "mtu" and step.approved_by == operator
    assert "ip link set dev ens1np0 mtu 9000" in " ".join(step.commands["gpu016"])  # the commands approved
    assert deployment.latest_run.job.parameters["apply_only"] == ["mtu"]

    again = browser_as(operator).post(f"/discovery/differences/{link.public_id}/fix-node/", follow=True)
    assert "No deployment step sets link_up on a node" in again.content.decode()
    assert Deployment.objects.count() == 1


def test_the_results_page_lists_nodes_that_need_a_look_and_counts_the_rest(browser_as, viewer, demo_cluster):
    hostnames = [f"gpu{n:03d}" for n in range(1, 31)]
    job = services.start_discovery(targets=TargetSpec(nodes=tuple(hostnames)), transport="sim")
    for node in Node.objects.filter(hostname__in=hostnames):
        NodeFacts.objects.create(job=job, node=node, facts={"bios": {"version": "2.4.1" + " " * 2000}})
    drifted = Node.objects.get(hostname="gpu007")
    Difference.objects.create(
        job=job, node=drifted, object_type="nic", object_key="ens1np0", field="mtu", expected="9000", discovered="1500"
    )
    client = browser_as(viewer)

    text = client.get(f"/discovery/jobs/{job.public_id}/").content.decode()
    assert 'id="node-gpu007"' in text and 'id="node-gpu008"' not in text
    assert "1 node needs a look; 29 match the inventory" in text
    assert " " * 2000 not in text  # the snapshot is a link to the facts API, not inlined for every node
    assert f"/api/discovery/facts/?job={job.public_id}&amp;node=gpu007" in text

    first = client.get(f"/discovery/jobs/{job.public_id}/", {"show": "all"}).content.decode()
    assert first.index('id="node-gpu007"') < first.index('id="node-gpu001"')  # what needs a look comes first
    assert first.count('<section class="card" id="node-') == 25 and "Page 1 of 2" in first
    second = client.get(f"/discovery/jobs/{job.public_id}/", {"show": "all", "page": 2}).content.decode()
    assert second.count('<section class="card" id="node-') == 5 and 'id="node-gpu030"' in second
