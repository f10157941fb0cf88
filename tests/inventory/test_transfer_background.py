"""Large imports as background jobs: 202 with the job's URL, progress in its events, all or nothing at the end of a
big file, the page handing over to the job page; small ones stay in the request. The task body runs here as the
worker would run it (tests/inventory/test_transfer_worker.py runs it in a real Celery worker)."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from apps.core.choices import ChangeSource
from apps.core.models import AuditEntry
from apps.inventory.models import ImportFile, Node
from apps.jobs.choices import JobStatus
from apps.jobs.imports import IMPORT_KIND, run_inventory_import
from apps.jobs.models import Job, JobEvent

pytestmark = pytest.mark.django_db


def nodes_csv(count: int, *, last: str | None = None) -> str:
    rows = [f"bulk{number:05d},compute,racked,8" for number in range(1, count + 1)]
    if last is not None:
        rows[-1] = last
    return "hostname,role,status,expected_gpu_count\n" + "\n".join(rows) + "\n"


def progress_of(job: Job) -> list[dict]:
    events = JobEvent.objects.filter(job=job, data__has_key="progress").order_by("seq")
    return [event.data["progress"] for event in events]


@pytest.fixture
def small_threshold(settings):
    settings.RACKPILOT_IMPORT_BACKGROUND_BYTES = 1000


@pytest.mark.wirings  # the import job commits as it goes on PostgreSQL only
def test_a_large_import_answers_202_with_the_job_and_the_job_imports_it(
    api_as, admin, small_threshold, django_capture_on_commit_callbacks
):
    client = api_as(admin)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/api/inventory/import/", data=nodes_csv(300), content_type="text/csv")

    assert response.status_code == 202, response.content
    job = Job.objects.get(public_id=response.data["job"])
    assert response["Location"] == response.data["url"] == f"http://testserver/api/jobs/{job.public_id}/"
    assert response.data["page"] == f"http://testserver/jobs/{job.public_id}/"
    assert (job.kind, job.status, job.requested_by) == (IMPORT_KIND, JobStatus.QUEUED, admin)
    assert not Node.objects.exists() and ImportFile.objects.count() == 1

    with django_capture_on_commit_callbacks(execute=True):
        assert run_inventory_import(job_public_id=str(job.public_id)) == JobStatus.SUCCEEDED

    assert Node.objects.count() == 300
    audited = AuditEntry.objects.filter(source=ChangeSource.IMPORT, actor=admin, object_type="inventory.node")
    assert audited.count() == 300
    reports = [(p["done"], p["written"], p["percent"]) for p in progress_of(job)]
    assert reports == [(250, 250, 83), (300, 300, 100)]
    assert not ImportFile.objects.exists()  # the upload goes once imported
    shown = client.get(f"/api/jobs/{job.public_id}/").data
    assert shown["status"] == JobStatus.SUCCEEDED
    assert shown["summary"] == "imported: 300 created, 0 updated, 0 unchanged"
    final = JobEvent.objects.filter(job=job).order_by("-seq").first()
    assert final.data["result"]["totals"] == {"created": 300, "updated": 0, "unchanged": 0}


def test_a_bad_row_at_the_end_of_a_big_file_leaves_nothing_written(
    api_as, admin, small_threshold, django_capture_on_commit_callbacks
):
    text = nodes_csv(2000, last="bulk02000,compute,racked,99")  # line 2001: more GPUs than a node holds
    with django_capture_on_commit_callbacks(execute=True):
        response = api_as(admin).post("/api/inventory/import/", data=text, content_type="text/csv")
    job = Job.objects.get(public_id=response.data["job"])
    audits = AuditEntry.objects.count()

    with django_capture_on_commit_callbacks(execute=True):
        assert run_inventory_import(job_public_id=str(job.public_id)) == JobStatus.FAILED

    assert not Node.objects.exists() and AuditEntry.objects.count() == audits
    problems = [event.data for event in JobEvent.objects.filter(job=job, data__has_key="message")]
    assert [(p["section"], p["line"], p["field"]) for p in problems] == [("nodes", 2001, "expected_gpu_count")]
    job.refresh_from_db()
    assert job.summary == "1 problem; nothing was imported"
    assert progress_of(job)[-1]["done"] == 2000  # every row was checked before the verdict


def test_small_imports_stay_in_the_request_unless_asked(api_as, admin, django_capture_on_commit_callbacks):
    client = api_as(admin)
    small = client.post("/api/inventory/import/", data=nodes_csv(3), content_type="text/csv")
    assert small.status_code == 200 and small.data["totals"]["created"] == 3
    with django_capture_on_commit_callbacks(execute=True):
        asked = client.post("/api/inventory/import/?background=true", data=nodes_csv(4), content_type="text/csv")
    assert asked.status_code == 202 and Node.objects.count() == 3
    refused = client.post("/api/inventory/import/?background=maybe", data=nodes_csv(4), content_type="text/csv")
    assert refused.status_code == 400
    assert refused.json()["problems"][0]["field"] == "background"
    assert Job.objects.count() == 1


def test_the_page_hands_a_large_upload_over_to_the_job_page(
    browser_as, admin, small_threshold, django_capture_on_commit_callbacks
):
    client = browser_as(admin)
    upload = SimpleUploadedFile("nodes.csv", nodes_csv(100).encode(), content_type="text/csv")
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/inventory/transfer/", {"file": upload, "fmt": ""})
    job = Job.objects.get(kind=IMPORT_KIND)
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.public_id}/"
    with django_capture_on_commit_callbacks(execute=True):
        run_inventory_import(job_public_id=str(job.public_id))
    page = client.get(response["Location"])
    assert page.status_code == 200
    text = page.content.decode()
    assert "100 of 100</span> rows done" in text and "imported: 100 created" in text


def test_a_job_claimed_once_is_not_run_again(api_as, admin, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = api_as(admin).post(
            "/api/inventory/import/?background=true", data=nodes_csv(2), content_type="text/csv"
        )
    job_id = response.data["job"]
    with django_capture_on_commit_callbacks(execute=True):
        assert run_inventory_import(job_public_id=job_id) == JobStatus.SUCCEEDED
    assert run_inventory_import(job_public_id=job_id) == "taken"  # a redelivered message does nothing
    assert Node.objects.count() == 2


def test_the_reaper_ends_an_import_whose_worker_stopped_beating(admin):
    from datetime import timedelta

    from django.utils import timezone

    from apps.jobs.services import reap_stale_jobs

    long_ago = timezone.now() - timedelta(minutes=5)
    lost = Job.objects.create(
        kind=IMPORT_KIND, transport="", shard_count=0, status=JobStatus.RUNNING, heartbeat=long_ago
    )
    # SQLite: the import holds the only write lock and cannot beat; such a job is not taken for lost.
    unbeaten = Job.objects.create(kind=IMPORT_KIND, transport="", shard_count=0, status=JobStatus.RUNNING)

    assert reap_stale_jobs() == 1
    lost.refresh_from_db()
    unbeaten.refresh_from_db()
    assert (lost.status, lost.summary) == (JobStatus.ERROR, "worker lost")
    assert unbeaten.status == JobStatus.RUNNING


@pytest.mark.wirings  # each database words the refusal its way
def test_a_row_the_database_refuses_in_a_batch_of_new_rows_is_named(admin):
    from apps.inventory.transfer import ImportRejected, import_inventory

    rows = [f"bulk{number:05d},compute,racked,10.9.{number // 250}.{number % 250 + 1}" for number in range(1, 701)]
    rows[600] = "bulk00601,compute,racked,10.9.0.2"  # line 602: bulk00001's address, in the second batch of 500
    text = "hostname,role,status,management_ip\n" + "\n".join(rows) + "\n"
    with pytest.raises(ImportRejected) as rejected:
        import_inventory(text=text, fmt="csv", user=admin)
    problems = [(p.line, p.field, p.message) for p in rejected.value.problems]
    assert problems == [(602, "management_ip", "Another node has this management ip.")]
    assert not Node.objects.exists() and not AuditEntry.objects.filter(object_type="inventory.node").exists()

    rows[600] = "bulk00601,compute,racked,10.9.9.9"
    text = "hostname,role,status,management_ip\n" + "\n".join(rows) + "\n"
    assert import_inventory(text=text, fmt="csv", user=admin).totals.created == 700
    assert AuditEntry.objects.filter(object_type="inventory.node", source=ChangeSource.IMPORT).count() == 700
    entry = AuditEntry.objects.get(object_repr="bulk00601")
    assert (entry.actor, entry.changes["management_ip"]) == (admin, [None, "10.9.9.9"])


def test_an_import_canceled_while_queued_never_runs_and_its_file_goes(
    api_as, admin, django_capture_on_commit_callbacks
):
    client = api_as(admin)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/api/inventory/import/?background=true", data=nodes_csv(5), content_type="text/csv")
        assert client.post(f"/api/jobs/{response.data['job']}/cancel/").data["status"] == JobStatus.CANCELED
    assert run_inventory_import(job_public_id=response.data["job"]) == "taken"
    assert not Node.objects.exists() and not ImportFile.objects.exists()
