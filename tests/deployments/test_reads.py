"""Reads never write: every page and API GET of a deployment, in each state it can be in, runs without one INSERT,
UPDATE or DELETE. A deployment's state is moved by its run's end (the deploy kind's job_finished, the reaper's
ending of a job included), with a Celery beat task as the safety net, never by someone looking at it."""

from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from apps.deployments import recording, services, tasks
from apps.deployments.choices import DeploymentState, WizardStage
from apps.deployments.models import Deployment, Suggestion
from apps.jobs import services as job_services
from apps.jobs.choices import JobStatus, ShardStatus
from apps.jobs.models import Job, JobShard

WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")
NO_WAIT = {"cooldown_seconds": 0}


@pytest.fixture
def no_enqueue(monkeypatch):
    monkeypatch.setattr(job_services, "enqueue", lambda job: None)


def _plan(name: str, operator, **targets):
    deployment = services.create_deployment(
        name=name, targets=job_services.TargetSpec(**targets), user=operator, transport="sim"
    )
    criteria = {check: NO_WAIT for check in deployment.criteria}
    return services.update_deployment(deployment=deployment, criteria_edits=criteria)


def _reads(deployment: Deployment) -> list[str]:
    """Every GET a person or a script makes about one deployment: pages, partials, downloads, API endpoints."""
    base, api = f"/deployments/{deployment.public_id}/", f"/api/deployments/{deployment.public_id}/"
    urls = ["/deployments/", f"/deployments/?state={deployment.state}", base, base + "suggestions/"]
    urls += [f"{base}wizard/{stage}/" for stage in WizardStage.values]
    urls += [base + "report/", base + "report/download/"]
    artefacts = [artefact.name for artefact in services.plan_artefacts(deployment)]
    urls += [f"{base}artefacts/{name}/" for name in artefacts]
    urls += [f"{base}cells/{hostname}/{step}/" for (hostname, step) in list(services.cell_outcomes(deployment))[:3]]
    urls += ["/api/deployments/", f"/api/deployments/?state={deployment.state}", api, api + "plan/"]
    urls += [api + "artefacts/", *(f"{api}artefacts/?name={name}" for name in artefacts)]
    urls += [api + "verdicts/", api + "approvals/", api + "report/", api + "report/?download=html"]
    urls += [f"/api/deployments/suggestions/?deployment__public_id={deployment.public_id}"]
    urls += [f"/api/deployments/suggestions/{s.public_id}/" for s in Suggestion.objects.filter(deployment=deployment)]
    urls += ["/api/acceptance-criteria/"]
    return urls


@contextmanager
def watching_writes():
    """Yields a list that collects every INSERT, UPDATE or DELETE run on the database while the block runs."""
    writes: list[str] = []

    def watch(execute, sql, params, many, context):
        if sql.lstrip().split(None, 1)[0].upper() in WRITES:
            writes.append(sql[:200])
        return execute(sql, params, many, context)

    with connection.execute_wrapper(watch):
        yield writes


def _walk(client, deployment: Deployment) -> dict[str, list[str]]:
    """GET every read of the deployment (and the htmx partial of each page); returns URL -> the writes it made."""
    made = {}
    for url in _reads(deployment):
        with watching_writes() as writes:
            response = client.get(url)
            assert response.status_code in (200, 302), f"{url} answered {response.status_code}"
            if not url.startswith("/api/"):
                client.get(url, headers={"HX-Request": "true"})
        if writes:
            made[url] = writes
    return made


@pytest.mark.django_db(transaction=True)
def test_no_page_or_api_read_of_a_deployment_writes_anything(
    browser_as, operator, demo_cluster, no_enqueue, run_shards, settings
):
    settings.RACKPILOT_EVENT_FLUSH_MS = 50
    client = browser_as(operator)  # logging in writes (session, last_login): done before the reads are watched
    client.get("/deployments/")

    _plan("draft", operator, nodes=("gpu017",))
    services.approve(deployment=_plan("approved", operator, nodes=("gpu018",)), user=operator)
    queued = _plan("queued", operator, nodes=("gpu019",))
    services.approve(deployment=queued, user=operator)
    services.start(deployment=queued, user=operator)  # running, its job queued (nothing picks it up here)
    finished = _plan("finished", operator, racks=("r04",), nodes=("gpu017",))
    services.approve(deployment=finished, user=operator)
    run_shards(services.start(deployment=finished, user=operator).job)
    # A run whose job is over but whose end never reached the deployment (its job_finished failed): a read must
    # not be what settles it.
    stuck = _plan("stuck", operator, nodes=("gpu020",))
    services.approve(deployment=stuck, user=operator)
    stuck_job = services.start(deployment=stuck, user=operator).job
    Job.objects.filter(pk=stuck_job.pk).update(status=JobStatus.CANCELED, finished=timezone.now())

    states = {d.name: d.state for d in Deployment.objects.all()}
    assert states == {
        "draft": DeploymentState.DRAFT,
        "approved": DeploymentState.APPROVED,
        "queued": DeploymentState.RUNNING,
        "finished": DeploymentState.FAILED,  # gpu017's BIOS is behind (demo data): set when its job ended
        "stuck": DeploymentState.RUNNING,
    }
    assert Suggestion.objects.filter(deployment=finished).exists()  # the finished one has suggestions to read

    for deployment in Deployment.objects.order_by("name"):
        assert _walk(client, deployment) == {}, f"reads of the {deployment.name} deployment wrote"

    assert Deployment.objects.get(pk=stuck.pk).state == DeploymentState.RUNNING
    assert tasks.settle() == 1  # beat's safety net settles it, and only it
    assert Deployment.objects.get(pk=stuck.pk).state == DeploymentState.CANCELED
    assert Deployment.objects.get(pk=queued.pk).state == DeploymentState.RUNNING  # its job is still queued


def test_the_watcher_sees_writes(operator, demo_cluster):
    """The walk above would catch a read that writes: a write in the watched block is reported."""
    deployment = _plan("watched", operator, nodes=("gpu017",))
    with watching_writes() as writes:
        Deployment.objects.get(pk=deployment.pk)
        assert writes == []
        services.update_deployment(deployment=deployment, description="changed")
    assert writes and all(sql.lstrip().upper().startswith(WRITES) for sql in writes)


def test_the_reaper_ending_a_run_settles_its_deployment(
    operator, demo_cluster, no_enqueue, django_capture_on_commit_callbacks
):
    deployment = _plan("reaped", operator, nodes=("gpu017",))
    services.approve(deployment=deployment, user=operator)
    job = services.start(deployment=deployment, user=operator).job
    shard = job_services.claim_shard(job=job, index=0, worker="lost-worker")
    JobShard.objects.filter(pk=shard.pk).update(heartbeat=timezone.now() - timedelta(hours=1))

    with django_capture_on_commit_callbacks(execute=True):
        assert job_services.reap_stale_jobs() == 1

    assert Job.objects.get(pk=job.pk).status == JobStatus.ERROR
    assert JobShard.objects.get(pk=shard.pk).status == ShardStatus.ERROR
    # Nothing was verified on gpu017, so the run needs attention; no read was needed for the state to follow.
    assert Deployment.objects.get(pk=deployment.pk).state == DeploymentState.FAILED


def test_canceling_a_queued_run_settles_its_deployment(
    operator, demo_cluster, no_enqueue, django_capture_on_commit_callbacks
):
    deployment = _plan("canceled", operator, nodes=("gpu017",))
    services.approve(deployment=deployment, user=operator)
    job = services.start(deployment=deployment, user=operator).job

    with django_capture_on_commit_callbacks(execute=True):
        job_services.cancel_job(job=job, user=operator)

    assert Job.objects.get(pk=job.pk).status == JobStatus.CANCELED
    assert Deployment.objects.get(pk=deployment.pk).state == DeploymentState.CANCELED
    assert recording.settle_finished_runs() == 0  # nothing left for the safety net


@pytest.mark.django_db
def test_the_api_names_the_state_as_the_pages_do(operator, viewer, demo_cluster, api_as, browser_as):
    """The API said `failed` where the page said "Needs attention": the label travels with the state."""
    deployment = _plan("r04", operator, racks=("r04",))
    Deployment.objects.filter(pk=deployment.pk).update(state=DeploymentState.FAILED)

    body = api_as(viewer).get(f"/api/deployments/{deployment.public_id}/").json()
    listed = api_as(viewer).get("/api/deployments/").json()["results"][0]

    assert (body["state"], body["state_label"]) == ("failed", "Needs attention")
    assert listed["state_label"] == "Needs attention"
    report = api_as(viewer).get(f"/api/deployments/{deployment.public_id}/report/").json()
    assert (report["state"], report["state_label"]) == ("failed", "Needs attention")  # the report's too
    assert "Needs attention" in browser_as(viewer).get(f"/deployments/{deployment.public_id}/").content.decode()
