"""The scheduler's view read back into Rackpilot: a node drained in Slurm outside Rackpilot shows as such, with its
reason, on the node page and in /api/health/, and scheduler_differences() names it; a drain through Rackpilot's
scheduler-action is read back and stored by the action itself."""

import pytest
from django.urls import reverse

from apps.inventory.models import Node
from apps.jobs import services as jobs
from apps.jobs.choices import JobStatus, StepStatus
from apps.schedulers import services
from apps.schedulers.choices import DifferenceKind
from apps.schedulers.models import SchedulerNodeState
from apps.schedulers.signals import scheduler_state_changed
from apps.simulator.services import run_command

pytestmark = pytest.mark.django_db(transaction=True)


def controller():
    return services.scheduler_controller()


def drain_outside_rackpilot(node: str, reason: str):
    """An administrator's own scontrol on the controller, not through Rackpilot."""
    answer = run_command(node=controller(), argv=["scontrol", "update", f"NodeName={node}", "State=DRAIN", reason])
    assert answer.exit_code == 0, answer.stderr


def readback(run_shards):
    job = run_shards(services.start_readback(transport="sim", scheduler="slurm"))
    assert job.status == JobStatus.SUCCEEDED, list(job.events.values_list("message", flat=True))
    return job


def test_a_node_drained_outside_rackpilot_is_read_back_with_its_reason(demo_cluster, run_shards, api_as, viewer):
    drain_outside_rackpilot("gpu005", "Reason=ECC storm on GPU 2")
    changes = []
    scheduler_state_changed.connect(lambda **kw: changes.append(kw), weak=False, dispatch_uid="test-readback")
    try:
        job = readback(run_shards)
    finally:
        scheduler_state_changed.disconnect(dispatch_uid="test-readback")
    view = SchedulerNodeState.objects.get(node__hostname="gpu005")
    assert (view.drain_state, view.state_text, view.reason, view.reason_by) == (
        "drained",
        "IDLE+DRAIN",
        "ECC storm on GPU 2",
        "root",
    )
    assert view.reason_at is not None and view.read_by_job == job.public_id
    assert SchedulerNodeState.objects.count() == services.scheduled_nodes().count()  # every compute node read
    (difference,) = services.scheduler_differences()
    assert (difference.hostname, difference.kind) == ("gpu005", DifferenceKind.DRAINED_OUTSIDE)
    assert "ECC storm on GPU 2" in difference.message
    assert {change["node"].hostname for change in changes} == set(
        services.scheduled_nodes().values_list("hostname", flat=True)
    )

    health = api_as(viewer).get("/api/health/").json()
    gpu005 = next(node for node in health["nodes"] if node["node"] == "gpu005")
    assert any("ECC storm on GPU 2" in reason and "Drained in the scheduler" in reason for reason in gpu005["reasons"])

    listed = api_as(viewer).get("/api/scheduler-nodes/").json()["results"]
    row = next(row for row in listed if row["node"] == "gpu005")
    assert (row["state"], row["drain_state"], row["reason"]) == ("IDLE+DRAIN", "drained", "ECC storm on GPU 2")

    # Read again with nothing changed: nothing is sent, the rows stay as they were.
    changes.clear()
    scheduler_state_changed.connect(lambda **kw: changes.append(kw), weak=False, dispatch_uid="test-readback")
    try:
        readback(run_shards)
    finally:
        scheduler_state_changed.disconnect(dispatch_uid="test-readback")
    assert changes == []


def test_the_node_page_shows_what_the_scheduler_says(demo_cluster, run_shards, browser_as, viewer):
    drain_outside_rackpilot("gpu006", "Reason=PSU 2 failed")
    readback(run_shards)
    node = Node.objects.get(hostname="gpu006")
    page = browser_as(viewer).get(reverse("node-detail", args=[node.public_id])).content.decode()
    assert "Slurm says <strong>drained</strong> (IDLE+DRAIN)" in page and "PSU 2 failed" in page
    assert "Drained in the scheduler, in service in Rackpilot" in page


def test_the_drain_action_reads_the_node_back_and_stores_it(demo_cluster, run_shards):
    job = jobs.create_job(
        kind="scheduler-action",
        targets=jobs.TargetSpec(nodes=(controller().hostname,)),
        parameters={"scheduler": "slurm", "action": "drain", "node": "gpu003", "reason": "cable r03 400G at 200G"},
        transport="sim",
        queue=False,
    )
    job = run_shards(job)
    verify = job.steps.get(step="verify")
    assert (job.status, verify.status) == (JobStatus.SUCCEEDED, StepStatus.SUCCEEDED)
    assert verify.summary == "Slurm: IDLE+DRAIN, reason 'cable r03 400G at 200G'"
    view = SchedulerNodeState.objects.get(node__hostname="gpu003")
    assert (view.drain_state, view.reason) == ("drained", "cable r03 400G at 200G")
    assert SchedulerNodeState.objects.count() == 1  # the action reads only its node

    resume = jobs.create_job(
        kind="scheduler-action",
        targets=jobs.TargetSpec(nodes=(controller().hostname,)),
        parameters={"scheduler": "slurm", "action": "undrain", "node": "gpu003"},
        transport="sim",
        queue=False,
    )
    assert run_shards(resume).status == JobStatus.SUCCEEDED
    view.refresh_from_db()
    assert (view.drain_state, view.reason) == ("", "")


def test_anonymous_callers_do_not_see_the_schedulers_view(api_client):
    assert api_client.get("/api/scheduler-nodes/").status_code in (401, 403)


def test_without_a_controller_no_readback_starts(demo_cluster, settings):
    settings.RACKPILOT_SCHEDULER_CONTROLLER = "no-such-host"
    with pytest.raises(Exception, match="No scheduler controller"):
        services.start_readback(transport="sim")


@pytest.mark.parametrize("scheduler", ["slurm", "kubernetes"])
def test_the_periodic_readback_starts_one_job_for_the_scheduler(demo_cluster, settings, scheduler):
    from apps.jobs.models import Job

    settings.RACKPILOT_JOB_DEFAULT_TRANSPORT = "sim"
    settings.RACKPILOT_SCHEDULER_KIND = "pbs"
    assert services.start_periodic_readback() == "no scheduler"
    settings.RACKPILOT_SCHEDULER_KIND = scheduler
    started = services.start_periodic_readback()
    job = Job.objects.get(kind="scheduler-readback")
    assert (job.public_id.hex, job.parameters) == (started.replace("-", ""), {"scheduler": scheduler})
    assert services.start_periodic_readback() == "still running"  # queued, not yet run: no second one
    assert Job.objects.filter(kind="scheduler-readback").count() == 1
