"""The incident pages: viewers read, operators open and approve, bad input is a form error, the live part polls."""

import pytest
from django.urls import reverse

from apps.diagnosis import services
from apps.diagnosis.forms import IncidentForm
from apps.diagnosis.models import Incident
from apps.jobs.models import Job


@pytest.mark.django_db
def test_viewers_read_but_cannot_open(training_job, browser_as, viewer, client):
    assert client.get(reverse("incident-list")).status_code == 302  # to the login page
    page = browser_as(viewer)
    response = page.get(reverse("incident-list"))
    assert response.status_code == 200 and b'id="incident-form"' not in response.content
    assert page.post(reverse("incident-open"), {"training_job": str(training_job.public_id)}).status_code == 403
    assert not Incident.objects.exists()


@pytest.mark.django_db
def test_opening_without_a_subject_is_a_form_error(training_job, browser_as, operator):
    response = browser_as(operator).post(reverse("incident-open"), {"transport": "sim"})
    assert response.status_code == 400
    assert b'id="training_job-errors"' in response.content
    assert not Incident.objects.exists() and not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_page_shows_evidence_ranking_and_the_fix_to_approve(
    training_job, inject, browser_as, operator, viewer, run_shards
):
    inject("gpu003", "pfc_off", "3")
    page = browser_as(operator)
    response = page.post(reverse("incident-open"), {"training_job": str(training_job.public_id), "transport": "sim"})
    incident = Incident.objects.get()
    assert response.status_code == 302 and response.url == reverse("incident-detail", args=[incident.public_id])
    detail = page.get(response.url).content.decode()
    # The runbook runs: the page follows the incident's socket (polling its live part without one).
    assert 'data-active="true"' in detail and "RackpilotIncidents.follow(" in detail
    for phase in ("log", "network"):
        run_shards(incident.jobs.get(parameters__phase=phase))
    live = page.get(reverse("incident-live", args=[incident.public_id])).content.decode()
    assert 'data-cause="pfc_off" data-score' in live.split('class="hypothesis"')[1]  # ranked first
    assert "gpu003$ mlnx_qos -i ens1np0 --trust dscp --pfc 0,0,0,1,0,0,0,0" in live
    assert 'class="primary approve"' in live
    assert "nothing has run until approved" in live
    as_viewer = browser_as(viewer).get(reverse("incident-detail", args=[incident.public_id])).content.decode()
    assert 'class="primary approve"' not in as_viewer and "An operator approves fixes." in as_viewer
    remediation = incident.remediations.get()
    url = reverse("remediation-approve", args=[incident.public_id, remediation.public_id])
    assert browser_as(viewer).post(url).status_code == 403
    page = browser_as(operator)  # one test client: log the operator back in
    assert page.post(url).status_code == 302
    remediation.refresh_from_db()
    assert remediation.approved_by == operator and remediation.fix_job is not None
    assert services.dry_run(remediation=remediation)[0].startswith("gpu003$ mlnx_qos")
    # Once approved the commands are no longer a dry run: the page says what was approved, not "nothing has run".
    live = page.get(reverse("incident-live", args=[incident.public_id])).content.decode()
    assert "nothing has run until approved" not in live and "The commands as approved, node by node:" in live


@pytest.mark.django_db
def test_incidents_show_in_the_node_history(demo_cluster, browser_as, operator, viewer):
    from apps.inventory.models import Node

    node = Node.objects.get(hostname="gpu012")
    incident = services.open_incident(user=operator, node=node, title="gpu012 hangs in all-reduce")
    page = browser_as(viewer).get(reverse("node-detail", args=[node.public_id])).content.decode()
    history = page.split('id="node-incidents"')[1]
    assert "gpu012 hangs in all-reduce" in history and str(incident.public_id) in history
    other = browser_as(viewer).get(reverse("node-detail", args=[Node.objects.get(hostname="gpu013").public_id]))
    assert "No incident has involved this node." in other.content.decode()


@pytest.mark.parametrize(("install", "shown"), [("sim", "sim"), ("ssh", "ssh")])
def test_the_incident_form_offers_the_installs_default_transport(settings, install, shown):
    settings.RACKPILOT_JOB_DEFAULT_TRANSPORT = install
    assert IncidentForm()["transport"].initial == shown


@pytest.mark.django_db
def test_run_the_runbook_again_is_in_the_live_part_once_the_runbook_has_ended(training_job, browser_as, operator):
    """The page's live part is what a reload shows: the button appears without one when the runbook ends."""
    incident = Incident.objects.create(title="stalled", training_job=training_job, state="investigating")
    live = lambda: browser_as(operator).get(reverse("incident-live", args=[incident.public_id])).content.decode()  # noqa: E731

    assert 'id="rerun"' not in live()
    Incident.objects.filter(pk=incident.pk).update(state="unresolved")
    assert 'id="rerun"' in live()


@pytest.mark.django_db
def test_the_form_names_every_bad_field_at_once(training_job, browser_as, operator):
    """The form's refusals (a transport it does not offer, a node it does not know) beside the incident's checks
    (runbook 2 needs the training job; only runbook 2 samples): none hides another, and a node that does not exist
    is not read as no subject at all."""
    client = browser_as(operator)
    first = client.post(
        reverse("incident-open"), {"transport": "telnet", "node": "gpu001", "runbook": "gpu-utilisation"}
    )
    assert first.status_code == 400
    assert set(first.context["form"].errors) == {"transport", "training_job"}, first.context["form"].errors

    body = {"transport": "sim", "node": "no-such-node", "runbook": "nccl-timeout", "sample_seconds": 60}
    second = client.post(reverse("incident-open"), body)
    assert second.status_code == 400
    assert set(second.context["form"].errors) == {"node", "sample_seconds"}, second.context["form"].errors
    assert not Incident.objects.exists() and not Job.objects.exists()
