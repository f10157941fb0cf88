"""A background import end to end: the API queues it, a real Celery worker process (against real Redis and the test
database) imports it, and the job's events show its progress; on PostgreSQL they are committed while the import's
own transaction is still open, so the page follows it live."""

import pytest
from django.db import connection
from kombu import Connection

from apps.inventory.models import Node
from apps.jobs.choices import JobStatus
from apps.jobs.models import Job, JobEvent
from apps.jobs.tasks import import_inventory
from tests.jobs.test_celery_integration import WORKER, _celery, _stop, _wait
from tests.redis_server import REDIS, redis_or_skip

# What a worker process commits while the import runs depends on the database (wirings).
pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.wirings]


def test_a_worker_process_imports_a_large_file_reporting_progress(api_as, admin, settings, tmp_path):
    redis_or_skip(flush=True)
    settings.RACKPILOT_IMPORT_BACKGROUND_BYTES = 1000
    rows = "\n".join(f"bulk{number:05d},compute,racked,rack-less node {number}" for number in range(1, 1501))
    text = "hostname,role,status,cpu_model\n" + rows + "\n"
    # This process's broker is the embedded one (in memory): the test sends the task to the worker's Redis itself.
    response = api_as(admin).post("/api/inventory/import/", data=text, content_type="text/csv")
    assert response.status_code == 202, response.content
    job_id = response.data["job"]

    log = tmp_path / "worker.log"
    worker = _celery(*WORKER, "--pool", "solo", "--loglevel", "INFO", "--hostname", "imp@%h", log=log)
    try:
        with Connection(REDIS) as broker:
            import_inventory.apply_async(args=[job_id], task_id=job_id, connection=broker)
        assert _wait(lambda: Job.objects.get(public_id=job_id).is_terminal, 240), log.read_text()
    finally:
        _stop(worker)

    job = Job.objects.get(public_id=job_id)
    assert job.status == JobStatus.SUCCEEDED, job.summary
    assert Node.objects.filter(hostname__startswith="bulk").count() == 1500
    events = list(JobEvent.objects.filter(job=job).order_by("seq"))
    progress = [event for event in events if "progress" in event.data]
    assert [event.data["progress"]["done"] for event in progress] == [250, 500, 750, 1000, 1250, 1500]
    assert [event.seq for event in events] == list(range(1, len(events) + 1))  # gapless
    if connection.vendor == "postgresql":
        # Written by the recorder's own connection as the rows went by, not all at the commit: the first progress
        # event (250 rows, flushed at once) is older than the last batch of nodes the import wrote. (With the
        # recorder's 0.5 s tick alone this failed: 1,500 rows take ~0.3 s, so every event waited for the tick.)
        # (One comparison of wall-clock stamps: comparing with job.finished too failed once in CI by 70 ms although
        # the event is flushed before finished is stamped, so the wall clock must have stepped back meanwhile.)
        newest_node = Node.objects.filter(hostname__startswith="bulk").latest("created").created
        assert progress[0].created < newest_node
