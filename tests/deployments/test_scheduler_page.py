"""The node page's scheduler section: the commands that tell the scheduler about the node's drain state, shown before
they run, and the scheduler-action job an operator starts from there on the controller."""

import pytest

from apps.inventory import services as inventory
from apps.inventory.models import Node
from apps.jobs.models import Job

pytestmark = pytest.mark.django_db


@pytest.fixture
def drained(demo_cluster):
    node = Node.objects.get(hostname="gpu007")
    inventory.drain_nodes(nodes=[node], reason="PSU swap (ticket 42)")
    return Node.objects.get(pk=node.pk)


def page(client, node) -> str:
    text = client.get(f"/nodes/{node.public_id}/").content.decode()
    return text[text.index('id="node-scheduler"') :]


def test_a_drained_node_shows_the_drain_commands_before_they_run(drained, browser_as, operator, settings):
    settings.RACKPILOT_SCHEDULER_KIND = "slurm"
    text = page(browser_as(operator), drained)
    assert "scontrol update NodeName=gpu007 State=DRAIN &#x27;Reason=PSU swap (ticket 42)&#x27;" in text
    assert ">mgmt01</a>" in text and "Drain in the scheduler" in text
    assert not Job.objects.exists()  # showing them starts nothing


def test_an_operator_starts_the_job_on_the_controller(drained, browser_as, operator, on_the_simulator):
    response = browser_as(operator).post(f"/deployments/nodes/{drained.public_id}/scheduler/")
    job = Job.objects.get(kind="scheduler-action")
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.public_id}/"
    assert list(job.nodes.values_list("hostname", flat=True)) == ["mgmt01"]
    assert job.parameters == {
        "scheduler": "kubernetes",
        "action": "drain",
        "node": "gpu007",
        "reason": "PSU-swap-ticket-42",  # the drain reason as the quarantine taint's value: a label value
    }
    assert "rackpilot.io/quarantine=PSU-swap-ticket-42:NoSchedule" in page(browser_as(operator), drained)
    assert job.requested_by == operator
    assert "Last told" in page(browser_as(operator), drained)


def test_an_undrained_node_is_returned_to_service(demo_cluster, browser_as, operator, on_the_simulator):
    node = Node.objects.get(hostname="gpu007")
    assert "kubectl uncordon gpu007" in page(browser_as(operator), node)
    browser_as(operator).post(f"/deployments/nodes/{node.public_id}/scheduler/")
    assert Job.objects.get(kind="scheduler-action").parameters["action"] == "undrain"


def test_a_viewer_sees_the_commands_but_cannot_run_them(drained, browser_as, viewer):
    client = browser_as(viewer)
    assert "Drain in the scheduler" not in page(client, drained)
    assert client.post(f"/deployments/nodes/{drained.public_id}/scheduler/").status_code == 403
    assert not Job.objects.exists()


def test_a_reason_slurm_cannot_take_is_refused_and_nothing_starts(demo_cluster, browser_as, operator, settings):
    settings.RACKPILOT_SCHEDULER_KIND = "slurm"
    node = Node.objects.get(hostname="gpu007")
    inventory.drain_nodes(nodes=[node], reason="it's hot")  # a quote: not in Slurm's reason pattern
    assert "is not Reason= letters" in page(browser_as(operator), node)
    response = browser_as(operator).post(f"/deployments/nodes/{node.public_id}/scheduler/", follow=True)
    assert "The scheduler was not told about gpu007" in response.content.decode()
    assert "reason" in response.content.decode()
    assert not Job.objects.exists()


def test_without_a_controller_nothing_starts(demo_cluster, browser_as, operator, settings):
    settings.RACKPILOT_SCHEDULER_CONTROLLER = "nosuchhost"
    node = Node.objects.get(hostname="gpu007")
    assert "No scheduler controller" in page(browser_as(operator), node)
    response = browser_as(operator).post(f"/deployments/nodes/{node.public_id}/scheduler/", follow=True)
    assert "No scheduler controller" in response.content.decode()
    assert not Job.objects.exists()


def test_a_reason_kubectl_cannot_carry_is_cut_down_not_refused(demo_cluster, browser_as, operator, on_the_simulator):
    node = Node.objects.get(hostname="gpu008")
    inventory.drain_nodes(nodes=[node], reason="ECC 'storm' on GPU 2; see #42")
    browser_as(operator).post(f"/deployments/nodes/{node.public_id}/scheduler/")
    assert Job.objects.get(kind="scheduler-action").parameters["reason"] == "ECC-storm-on-GPU-2-see-42"
