"""The job list (issue 27, walk 11): jobs the system started can be hidden (page and API share the filter), a row
names the training job its job is about, and a failed job's bar is red, not a full green one."""

import pytest

from apps.jobs.choices import JobStatus
from apps.jobs.models import Job

pytestmark = pytest.mark.django_db


@pytest.fixture
def jobs(operator):
    mine = Job.objects.create(kind="sleep", transport="sim", requested_by=operator, status=JobStatus.FAILED)
    read = Job.objects.create(
        kind="training-progress",
        transport="sim",
        parameters={"training_job": "7d4c1f2e-0000-4000-8000-000000000001", "training_job_name": "llm-pretrain"},
    )
    return mine, read


def test_system_jobs_can_be_hidden_on_the_page_and_in_the_api(jobs, browser_as, api_as, viewer):
    mine, read = jobs
    page = browser_as(viewer).get("/jobs/?started_by=people").content.decode()
    assert str(mine.public_id)[:8] in page and str(read.public_id)[:8] not in page
    assert '<option value="people" selected>' in page
    system = browser_as(viewer).get("/jobs/?started_by=system").content.decode()
    assert str(read.public_id)[:8] in system and str(mine.public_id)[:8] not in system
    listed = api_as(viewer).get("/api/jobs/?started_by=people").json()["results"]
    assert [job["id"] for job in listed] == [str(mine.public_id)]
    assert api_as(viewer).get("/api/jobs/?started_by=robots").status_code == 400


def test_a_row_names_its_training_job_and_a_failed_job_is_red(jobs, browser_as, viewer):
    mine, read = jobs
    page = browser_as(viewer).get("/jobs/").content.decode()
    row = page.split(f'data-job="{read.public_id}"')[1].split("</tr>")[0]
    assert "training-progress" in row and "· llm-pretrain" in row
    failed = page.split(f'data-job="{mine.public_id}"')[1].split("</tr>")[0]
    assert 'class="bar red"' in failed and 'class="bar green"' not in failed
