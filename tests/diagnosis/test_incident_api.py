"""Incidents over the REST API: open (operators), read (viewers), refuse bad input naming the field, approve a fix."""

import pytest

from apps.diagnosis import utilisation
from apps.diagnosis.models import Incident
from apps.jobs.models import Job
from apps.workloads.models import TrainingJob

URL = "/api/incidents/"


@pytest.mark.django_db
def test_anonymous_and_viewers_cannot_open_or_approve(training_job, api_client, api_as, viewer):
    assert api_client.get(URL).status_code in (401, 403)
    as_viewer = api_as(viewer)
    assert as_viewer.get(URL).status_code == 200
    response = as_viewer.post(URL, {"training_job": str(training_job.public_id)}, format="json")
    assert response.status_code == 403
    assert not Incident.objects.exists() and not Job.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "training_job"),
        ({"training_job": "00000000-0000-0000-0000-000000000000"}, "training_job"),
        ({"node": "no-such-node"}, "node"),
        ({"node": "gpu001", "transport": "telnet"}, "transport"),
    ],
)
def test_bad_input_names_the_field_and_changes_nothing(training_job, api_as, operator, body, field):
    response = api_as(operator).post(URL, body, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert not Incident.objects.exists() and not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_open_follow_and_approve_over_the_api(training_job, inject, api_as, operator, viewer, run_shards):
    inject("gpu002", "pfc_off", "3")
    client = api_as(operator)
    response = client.post(URL, {"training_job": str(training_job.public_id), "transport": "sim"}, format="json")
    assert response.status_code == 201, response.json()
    incident_id = response.json()["id"]
    for phase in ("log", "network"):
        run_shards(Job.objects.get(parameters__incident=incident_id, parameters__phase=phase))
    detail = api_as(viewer).get(f"{URL}{incident_id}/").json()
    assert detail["cause"] == "pfc_off" and detail["suspect_nodes"] == ["gpu002"]
    assert detail["hypotheses"][0]["cause"] == "pfc_off" and detail["hypotheses"][0]["supporting"]
    watchdog = next(row for row in detail["evidence"] if row["topic"] == "watchdog")
    assert watchdog["command"] == "tail -n 2000 /var/log/train/llm-pretrain.log"
    assert watchdog["raw_output"].startswith(f"http://testserver/api/jobs/{watchdog['job']}/artifacts/")
    assert "Watchdog caught collective operation timeout" in client.get(watchdog["raw_output"]).content.decode()
    assert detail["ranking_changes"], "the ranking's changes are kept"
    dry = client.get(f"{URL}{incident_id}/dry-run/").json()
    assert dry[0]["commands"][0] == "gpu002$ mlnx_qos -i ens1np0 --trust dscp --pfc 0,0,0,1,0,0,0,0"
    remediation = detail["remediations"][0]["id"]
    approve = f"{URL}{incident_id}/remediations/{remediation}/approve/"
    assert api_as(viewer).post(approve).status_code == 403
    response = client.post(approve)
    assert response.status_code == 201 and response.json()["kind"] == "nccl-timeout"
    assert client.post(approve).status_code == 400  # approved once only
    fixed = client.get(f"{URL}{incident_id}/").json()["remediations"][0]
    assert fixed["approved_by"] == "operator" and fixed["state"] == "approved"


@pytest.mark.django_db
def test_every_bad_field_is_named_at_once(training_job, api_as, operator):
    """A field refused by its shape (a node that does not exist, a transport) no longer hides what the incident's
    own checks say of the others (runbook 2 needs the training job; a job without a log; a window for runbook 1)."""
    client = api_as(operator)
    first = client.post(
        URL, {"node": "no-such-node", "transport": "telnet", "runbook": "gpu-utilisation"}, format="json"
    )
    assert first.status_code == 400
    assert set(first.json()) == {"node", "transport", "training_job"}, first.json()
    assert first.json()["training_job"] == ["The gpu-utilisation runbook needs the training job."]

    no_log = TrainingJob.objects.create(name="no-log", ranks_per_node=8)
    body = {"training_job": str(no_log.public_id), "title": "t" * 201, "sample_seconds": utilisation.MIN_WINDOW_S}
    second = client.post(URL, body, format="json")
    assert second.status_code == 400
    assert set(second.json()) == {"title", "training_job", "sample_seconds"}, second.json()
    assert not Incident.objects.exists() and not Job.objects.exists()
