"""The job page holds at hundreds of nodes: its node × step matrix shows one page of nodes, a failures-only view and a
node filter, the counts per status of the whole job, and the same number of queries at 30 nodes as at 300."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.jobs.choices import JobStatus, StepStatus
from apps.jobs.models import Job, JobShard, JobStep
from apps.jobs.views import MATRIX_PAGE_SIZE

STEPS = ("ping", "nvidia-smi", "lspci", "ethtool")
CELL = re.compile(r'<td class="cell (\w+)" data-host="([^"]+)" data-step="([^"]+)" data-status="(\w+)"')


def make_job(nodes: int, *, failed_every: int = 0) -> Job:
    """A finished job of `nodes` nodes × STEPS; the last step fails on every `failed_every`th node."""
    job = Job.objects.create(kind="shell", transport="sim", status=JobStatus.FAILED, node_count=nodes)
    shard = JobShard.objects.create(job=job, index=0)
    cells = []
    for n in range(nodes):
        failed = failed_every and n % failed_every == 0
        for position, step in enumerate(STEPS):
            status = StepStatus.FAILED if failed and step == STEPS[-1] else StepStatus.SUCCEEDED
            cells.append(
                JobStep(job=job, shard=shard, hostname=f"gpu{n:03d}", step=step, position=position, status=status)
            )
    JobStep.objects.bulk_create(cells)
    return job


def cells(html: str) -> list[tuple[str, str, str, str]]:
    return CELL.findall(html)


def rows(html: str) -> list[str]:
    matrix = html.split('id="matrix"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'<tr><th class="mono">([^<]+)</th>', matrix)


@pytest.fixture
def page(browser_as, viewer):
    client = browser_as(viewer)
    return lambda job, query="": client.get(f"/jobs/{job.public_id}/{query}").content.decode()


def test_a_300_node_job_page_lists_one_page_of_nodes_with_the_whole_jobs_counts(page, db):
    job = make_job(300, failed_every=7)  # 43 nodes fail their last step
    html = page(job)
    shown = rows(html)
    assert len(shown) == MATRIX_PAGE_SIZE == 100
    assert shown == [f"gpu{n:03d}" for n in range(100)]
    assert len(cells(html)) == 100 * len(STEPS)
    assert "Nodes 1–100 of 300" in html and "43 nodes with a failure" in html
    # The counts are the whole job's, not the page's.
    assert "1157 succeeded" in html and "43 failed" in html
    # The log's node filter still offers every node.
    assert html.count("<option>gpu") == 300

    last = page(job, "?page=3")
    assert rows(last) == [f"gpu{n:03d}" for n in range(200, 300)]
    assert "Nodes 201–300 of 300" in last
    assert rows(page(job, "?page=999")) == rows(page(job, "?page=last")) == rows(last)
    assert rows(page(job, "?page=nonsense")) == shown


def test_the_failures_only_view_shows_only_failed_cells_of_the_failed_nodes(page, db):
    job = make_job(300, failed_every=7)
    html = page(job, "?only=failures")
    failed_nodes = [f"gpu{n:03d}" for n in range(0, 300, 7)]
    assert rows(html) == failed_nodes
    shown = cells(html)
    assert len(shown) == len(failed_nodes)
    assert {(colour, step, status) for colour, _, step, status in shown} == {("red", STEPS[-1], "failed")}
    assert 'data-failures-only="1"' in html
    assert "Nodes 1–43 of 43 shown by the filter" in html


def test_the_node_filter_narrows_the_rows_and_keeps_the_other_filters_across_pages(page, db):
    job = make_job(300, failed_every=7)
    html = page(job, "?node=gpu1")  # gpu100 … gpu199
    assert rows(html) == [f"gpu{n:03d}" for n in range(100, 200)]
    both = page(job, "?node=gpu1&only=failures")
    assert rows(both) == [f"gpu{n:03d}" for n in range(100, 200) if n % 7 == 0]
    nothing = page(job, "?node=nosuchnode")
    assert rows(nothing) == [] and "No node matches" in nothing
    many = page(job, "?only=failures&node=gpu")
    assert rows(many) == [f"gpu{n:03d}" for n in range(0, 300, 7)]  # 43: one page
    paged = page(job, "?node=gpu")
    assert 'href="?node=gpu&amp;page=2" rel="next"' in paged


def test_query_count_does_not_grow_with_nodes(browser_as, viewer, db):
    client = browser_as(viewer)
    small, large = make_job(30, failed_every=7), make_job(300, failed_every=7)
    counts = []
    for job in (small, large):
        with CaptureQueriesContext(connection) as queries:
            assert client.get(f"/jobs/{job.public_id}/?only=failures").status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_cells_open_their_output_through_one_listener_not_an_attribute_per_cell(page, db):
    job = make_job(3)
    html = page(job)
    assert "hx-get" not in html.split('id="matrix"', 1)[1].split("</table>", 1)[0]
    assert f'data-cell-url="/jobs/{job.public_id}/cells/__host__/__step__/"' in html


def test_a_failed_job_s_bar_is_not_a_green_success(page, browser_as, viewer, db):
    """Every step ran, so the bar is full: its colour is the job's status, not green for a failed job."""
    job = make_job(3, failed_every=2)

    listed = browser_as(viewer).get("/jobs/").content.decode()
    detail = page(job)

    assert '<div class="bar red" data-field="bar" style="width: 100%">' in listed
    assert '<div class="bar red" id="progress-bar"' in detail


def test_the_progress_a_live_page_is_sent_counts_the_nodes_with_a_failure(db):
    """The matrix's "N nodes with a failure" is repainted from each progress the page is sent, so it moves with the
    cells (it read 0 beside red cells until a reload)."""
    from apps.jobs.events import progress_of

    assert progress_of(make_job(30).pk)["failed_nodes"] == 0
    job = make_job(30, failed_every=7)  # gpu000, 007, 014, 021, 028
    JobStep.objects.filter(job=job, hostname="gpu000").update(status=StepStatus.ERROR)  # still one node

    assert progress_of(job.pk)["failed_nodes"] == 5
