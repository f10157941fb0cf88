"""The training job page's progress and loss panel in a real browser, end to end: the embedded server's schedule
starts the `training-progress` read of the simulated job's log by itself, and the page then draws step and loss with
Plotly."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.accounts.choices import Role
from apps.inventory.demo import DEMO, load_cluster
from apps.inventory.models import Node
from apps.workloads.choices import TrainingState
from apps.workloads.models import TrainingJob, TrainingProgress
from apps.workloads.services import set_training_nodes
from tests import factories
from tests.browser.session import log_in

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def live_server_env():
    return {
        "RACKPILOT_JOB_DEFAULT_TRANSPORT": "sim",
        "RACKPILOT_TRAINING_PROGRESS_SECONDS": "2",
        "RACKPILOT_JOB_REAPER_SECONDS": "1",
    }


def test_the_page_draws_the_progress_the_schedule_read(live_server_url, browser_page):
    load_cluster(DEMO)
    factories.make_user(role=Role.VIEWER, username="watcher", password="correct-horse-battery")
    job = TrainingJob.objects.create(
        name="llm-pretrain",
        checkpoint_dir="/checkpoints/llm-pretrain",
        log_path="/var/log/train/llm-pretrain.log",
        state=TrainingState.RUNNING,
        started_at=timezone.now() - timedelta(minutes=20),
    )
    set_training_nodes(job=job, nodes=[Node.objects.get(hostname=host) for host in ("gpu001", "gpu002")])

    page = browser_page
    page.set_default_timeout(60000)
    log_in(page, live_server_url, "watcher")
    for _ in range(60):  # the schedule reads the log within a few seconds
        page.goto(f"{live_server_url}/workloads/training/{job.public_id}/")
        if page.query_selector("[data-plotly-figure='training-progress']"):
            break
        assert "No step lines read from the log yet" in page.content()
        page.wait_for_timeout(1000)
    page.wait_for_selector("[data-plotly-figure='training-progress'] .main-svg")
    traces = page.evaluate(
        """document.querySelector("[data-plotly-figure='training-progress']").data.map(t => [t.name, t.y.length])"""
    )
    stored = TrainingProgress.objects.filter(job=job).count()
    assert stored >= 60  # ~19 minutes of 1.6 s steps, one line every 10
    assert [name for name, _ in traces] == ["loss", "step"] and traces[0][1] >= 60
    assert page.query_selector("[data-plotly-figure='training-throughput'] .main-svg")
