"""POST /api/nodes/{id}/bmc-power/ and the node page's "Power cycle through the BMC": operators start the bmc-power
job (201, the job), a bad action or a node without a BMC login is a 400 naming the field, viewers get 403,
anonymous 401/403; the destructive start is audited with the user and the source."""

import pytest

from apps.core.choices import ChangeSource
from apps.core.models import AuditEntry
from apps.jobs.models import Job

pytestmark = pytest.mark.django_db


def url(node):
    return f"/api/nodes/{node.public_id}/bmc-power/"


def test_an_operator_power_cycles_a_node_and_it_is_audited(gpu_node, sim_bmc, api_as, operator):
    sim_bmc()

    response = api_as(operator).post(url(gpu_node), {"action": "cycle", "reason": "no ssh"}, format="json")

    assert response.status_code == 201, response.content
    job = Job.objects.get(public_id=response.json()["id"])
    assert (job.kind, job.parameters, job.requested_by) == (
        "bmc-power",
        {"action": "cycle", "reason": "no ssh"},
        operator,
    )
    entry = AuditEntry.objects.get(object_repr=f"{gpu_node.hostname}: power cycle through the BMC")
    assert (entry.actor, entry.source, entry.changes["reason"]) == (operator, ChangeSource.API, "no ssh")


def test_bad_input_is_a_400_naming_the_field(gpu_node, sim_bmc, api_as, operator):
    client = api_as(operator)

    no_bmc = client.post(url(gpu_node), {"action": "cycle"}, format="json")
    sim_bmc()
    bad_action = client.post(url(gpu_node), {"action": "explode"}, format="json")
    missing = client.post(url(gpu_node), {}, format="json")

    assert no_bmc.status_code == 400 and "nodes" in no_bmc.json()
    assert bad_action.status_code == 400 and "action" in bad_action.json()
    assert missing.status_code == 400 and "action" in missing.json()
    assert not Job.objects.filter(kind="bmc-power").exists()


def test_viewers_and_anonymous_are_refused(gpu_node, sim_bmc, api_as, viewer, api_client):
    sim_bmc()

    assert api_as(viewer).post(url(gpu_node), {"action": "cycle"}, format="json").status_code == 403
    assert api_client.post(url(gpu_node), {"action": "cycle"}, format="json").status_code in (401, 403)
    assert not Job.objects.filter(kind="bmc-power").exists()


def test_the_job_api_does_not_start_it_directly(gpu_node, sim_bmc, api_as, operator):
    sim_bmc()

    response = api_as(operator).post(
        "/api/jobs/", {"kind": "bmc-power", "targets": {"nodes": [gpu_node.hostname]}, "parameters": {"action": "off"}},
        format="json",
    )  # fmt: skip

    assert response.status_code == 400 and "kind" in response.json()


def test_the_node_page_button(gpu_node, sim_bmc, browser_as, operator, viewer):
    sim_bmc()
    page = browser_as(operator).get(f"/nodes/{gpu_node.public_id}/")
    assert "Power cycle through the BMC" in page.content.decode()

    response = browser_as(operator).post(f"/telemetry/nodes/{gpu_node.public_id}/bmc/power/", {"reason": "hung"})

    job = Job.objects.get(kind="bmc-power")
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.public_id}/"
    assert job.parameters == {"action": "cycle", "reason": "hung"}
    entry = AuditEntry.objects.get(object_repr=f"{gpu_node.hostname}: power cycle through the BMC")
    assert (entry.actor, entry.source) == (operator, ChangeSource.UI)


def test_viewers_see_no_button_and_are_refused(gpu_node, sim_bmc, browser_as, viewer):
    sim_bmc()
    client = browser_as(viewer)

    assert "Power cycle through the BMC" not in client.get(f"/nodes/{gpu_node.public_id}/").content.decode()
    assert client.post(f"/telemetry/nodes/{gpu_node.public_id}/bmc/power/", {"reason": "x"}).status_code == 403
    assert not Job.objects.filter(kind="bmc-power").exists()
