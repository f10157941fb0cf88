"""Rehearsals from the simulator page: operators start the fault's runbook on a training job it hurts, marked as a
rehearsal; viewers cannot; a fault that hurts no training job, or one that is gone, is refused with nothing made."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.core.models import AuditEntry
from apps.diagnosis.choices import Cause, IncidentState
from apps.diagnosis.models import Incident
from apps.diagnosis.phases import Phase
from apps.inventory.models import Node
from apps.jobs.models import Job
from apps.simulator import services as sim
from apps.simulator.models import SimChange, SimFault
from apps.workloads.choices import TrainingState
from apps.workloads.models import TrainingJob

REHEARSE = reverse("incident-rehearse")


def _fault(hostname, kind, target=""):
    return sim.inject_fault(node=Node.objects.get(hostname=hostname), kind=kind, target=target)


@pytest.mark.django_db
def test_viewers_see_no_button_and_cannot_rehearse(demo_cluster, browser_as, viewer):
    fault = _fault("gpu003", "pfc_off", "3")
    page = browser_as(viewer)
    assert "Rehearse runbook" not in page.get(reverse("simulator")).content.decode()
    assert page.post(REHEARSE, {"fault": str(fault.public_id)}).status_code == 403
    assert not Incident.objects.exists() and not Job.objects.exists() and not TrainingJob.objects.exists()


@pytest.mark.django_db
def test_the_button_is_next_to_the_faults_that_hurt_a_training_job(demo_cluster, browser_as, operator):
    hurts = _fault("gpu003", "pfc_off", "3")
    harmless = _fault("gpu004", "nvlink_down", "0")
    page = browser_as(operator).get(reverse("simulator")).content.decode()
    assert f'name="fault" value="{hurts.public_id}"' in page
    assert f'name="fault" value="{harmless.public_id}"' not in page


@pytest.mark.django_db
def test_a_fault_a_command_repaired_says_so_and_is_not_offered_for_rehearsal(demo_cluster, browser_as, operator):
    # The walk: an MTU fault diagnosed and fixed (the runbook's `ip link set … mtu 9000`) stays injected; rehearsing
    # it opened an incident that found nothing and ended "Not resolved".
    fault = _fault("gpu010", "mtu", "ens3np0")
    SimChange.objects.create(node=fault.node, key="nic:ens3np0:mtu", value=9000)
    page = browser_as(operator)

    listed = page.get(reverse("simulator")).content.decode()
    response = page.post(REHEARSE, {"fault": str(fault.public_id)}, follow=True)

    assert 'class="badge green repaired">repaired by a command' in listed
    assert f'name="fault" value="{fault.public_id}"' not in listed
    assert response.redirect_chain == [(reverse("simulator"), 302)]
    assert "A command repaired this fault at" in response.content.decode()
    assert not Incident.objects.exists() and not TrainingJob.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_an_operator_rehearses_on_the_running_job_the_fault_hurts(training_job, browser_as, api_as, operator):
    fault = _fault("gpu003", "pfc_off", "3")
    response = browser_as(operator).post(REHEARSE, {"fault": str(fault.public_id)})
    incident = Incident.objects.get()
    assert response.status_code == 302 and response.url == reverse("incident-detail", args=[incident.public_id])
    assert incident.rehearsal and incident.training_job == training_job and incident.opened_by == operator
    assert (incident.runbook, incident.transport, incident.state) == (
        "nccl-timeout",
        "sim",
        IncidentState.INVESTIGATING,
    )
    assert incident.title.startswith("Rehearsal: gpu003: PFC off for priority 3")
    assert incident.jobs.get().parameters["phase"] == Phase.LOG
    fault.refresh_from_db()
    assert fault.created <= timezone.now() - timedelta(minutes=15)  # the watchdog has had time to fire
    started = AuditEntry.objects.get(action="start", object_type="diagnosis.incident", object_id=str(incident.pk))
    assert started.actor == operator and "PFC off" in started.changes["rehearsal"][1]
    page = browser_as(operator).get(response.url).content.decode()
    assert (
        'id="rehearsal"' in page and "rehearsal" in browser_as(operator).get(reverse("incident-list")).content.decode()
    )


@pytest.mark.django_db(transaction=True)
def test_without_a_job_on_the_node_a_demo_job_is_made_and_the_runbook_finds_the_fault(
    demo_cluster, browser_as, operator, run_shards
):
    fault = _fault("gpu010", "pfc_off", "3")
    assert browser_as(operator).post(REHEARSE, {"fault": str(fault.public_id)}).status_code == 302
    incident = Incident.objects.get()
    job = incident.training_job
    assert job.name == "rehearsal-gpu010" and job.state == TrainingState.RUNNING
    hosts = [member.node.hostname for member in job.members.select_related("node").order_by("node_rank")]
    assert "gpu010" in hosts and len(hosts) == 4
    for phase in (Phase.LOG, Phase.NETWORK):
        run_shards(incident.jobs.get(parameters__phase=phase))
    incident.refresh_from_db()
    assert list(incident.suspect_nodes.values_list("hostname", flat=True)) == ["gpu010"]
    assert (incident.state, incident.cause) == (IncidentState.CONCLUDED, Cause.PFC_OFF)


@pytest.mark.django_db
def test_a_storage_fault_rehearses_the_recovery_runbook_where_the_job_checkpoints(demo_cluster, browser_as, operator):
    fault = _fault("gpu005", "disk_full", "/checkpoints")
    assert browser_as(operator).post(REHEARSE, {"fault": str(fault.public_id)}).status_code == 302
    incident = Incident.objects.get()
    assert incident.runbook == "training-interrupted" and incident.rehearsal
    assert incident.training_job.checkpoint_dir == "/checkpoints/rehearsal-gpu005"


@pytest.mark.django_db
def test_a_harmless_or_vanished_fault_is_refused_with_nothing_made(demo_cluster, browser_as, operator):
    page = browser_as(operator)
    harmless = _fault("gpu004", "nvlink_down", "0")
    response = page.post(REHEARSE, {"fault": str(harmless.public_id)}, follow=True)
    assert "does not hurt a training job" in response.content.decode()
    gone = _fault("gpu004", "pfc_off", "3")
    SimFault.objects.filter(pk=gone.pk).delete()
    response = page.post(REHEARSE, {"fault": str(gone.public_id)}, follow=True)
    assert "No such injected fault" in response.content.decode()
    response = page.post(REHEARSE, {}, follow=True)
    assert "This field is required." in response.content.decode()
    assert not Incident.objects.exists() and not TrainingJob.objects.exists() and not Job.objects.exists()
