"""The training job page's progress and loss panel: what the `training-progress` reads stored, drawn; an empty state
before any step line; a GET that writes nothing."""

import json
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.jobs.models import Job
from apps.parsers.training_log import parse_progress
from apps.workloads import services
from apps.workloads.demo import load_workloads
from apps.workloads.models import TrainingJob, TrainingProgress
from tests.parsers.helpers import real

pytestmark = pytest.mark.django_db

DEEPSPEED = (
    "training-logs/deepspeed-chat-step1-sft-opt-1.3b-16rank-zero2-full-run-fp16-overflow-steps-saving-final-model-"
    "exit.log"
)
MEGATRON = (
    " [2026-12-01 06:{minute:02d}:00] iteration {step:>8}/  500000 | consumed samples: {samples:>12} | elapsed time "
    "per iteration (ms): 1600.0 | learning rate: 3.000000E-04 | global batch size:   512 | lm loss: {loss:.6E} | "
    "loss scale: 1.0 | grad norm: 0.812 | number of skipped iterations:   0 | number of nan iterations:   0 |"
)


@pytest.fixture
def job(demo_cluster):
    load_workloads()
    return TrainingJob.objects.get()


def _figures(page: str) -> dict[str, dict]:
    found = {}
    for key in ("training-progress", "training-throughput"):
        marker = f'<script id="{key}" type="application/json">'
        if marker in page:
            found[key] = json.loads(page.split(marker, 1)[1].split("</script>", 1)[0])
    return found


def test_before_any_step_line_the_panel_says_so(browser_as, viewer, job):
    page = browser_as(viewer).get(f"/workloads/training/{job.public_id}/").content.decode()

    assert "Progress and loss" in page and "No step lines read from the log yet" in page
    assert _figures(page) == {} and "plotly.min.js" not in page


def test_a_job_without_a_log_path_says_there_is_nothing_to_read(browser_as, viewer, job):
    TrainingJob.objects.filter(pk=job.pk).update(log_path="")

    page = browser_as(viewer).get(f"/workloads/training/{job.public_id}/").content.decode()

    assert "No log path" in page


def test_the_panel_draws_loss_and_step_against_time(browser_as, viewer, job):
    text = "\n".join(
        MEGATRON.format(minute=minute, step=100 * minute, samples=51200 * minute, loss=10 - minute / 10)
        for minute in range(1, 6)
    )
    services.record_progress(job=job, points=parse_progress(text))

    page = browser_as(viewer).get(f"/workloads/training/{job.public_id}/").content.decode()

    assert "Step <strong>500</strong>" in page and "loss <strong>9.5000</strong>" in page and "320.0 samples/s" in page
    figures = _figures(page)
    loss, step = figures["training-progress"]["data"]
    assert (loss["name"], step["name"], step["yaxis"]) == ("loss", "step", "y2")
    assert loss["y"] == pytest.approx([9.9, 9.8, 9.7, 9.6, 9.5]) and step["y"] == [100, 200, 300, 400, 500]
    assert loss["x"][0].startswith("2026-12-01T06:01:00")
    # Time along the bottom, the step count on the right, in whole steps ("1.5k" and 0.5-step ticks read as floats).
    layout = figures["training-progress"]["layout"]
    assert (layout["xaxis"]["title"]["text"], layout["xaxis"]["type"]) == ("Time (UTC)", "date")
    assert (layout["yaxis2"]["title"]["text"], layout["yaxis2"]["tickformat"]) == ("Step", ",d")
    assert layout["yaxis"]["title"]["text"] == "Loss"
    rate, learning = figures["training-throughput"]["data"]
    assert rate["y"] == pytest.approx([320.0] * 5) and learning["y"] == pytest.approx([3e-4] * 5)


def test_a_real_deepspeed_log_without_loss_still_draws_steps_and_throughput(browser_as, viewer, job):
    services.record_progress(job=job, points=parse_progress(real(DEEPSPEED)))

    page = browser_as(viewer).get(f"/workloads/training/{job.public_id}/").content.decode()

    figures = _figures(page)
    (step,) = figures["training-progress"]["data"]  # no loss trace: DeepSpeed-Chat prints none per step
    assert step["name"] == "step" and step["y"][-1] == 7360 and len(step["y"]) == 736
    assert "loss <strong>" not in page and "Step <strong>7360</strong>" in page


def test_a_restart_from_an_older_checkpoint_shows_the_step_the_run_is_at_now(job):
    first = MEGATRON.format(minute=1, step=1100, samples=0, loss=3.0)
    again = MEGATRON.format(minute=9, step=1010, samples=0, loss=3.1)  # resumed from step 1000
    services.record_progress(job=job, points=parse_progress(f"{first}\n{again}"))

    newest = services.latest_progress(jobs=[job])[job.pk]

    assert (newest.step, newest.time) == (1010, datetime(2026, 12, 1, 6, 9, tzinfo=UTC))


def test_the_page_writes_nothing_and_starts_no_read(browser_as, viewer, job):
    client = browser_as(viewer)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(f"/workloads/training/{job.public_id}/").status_code == 200

    writes = [q["sql"] for q in queries.captured_queries if q["sql"].lstrip().split()[0].upper() != "SELECT"]
    assert [sql for sql in writes if "session" not in sql.lower()] == []
    assert not TrainingProgress.objects.exists() and not Job.objects.exists()


def test_anonymous_visitors_are_sent_to_sign_in(client, job):
    assert client.get(f"/workloads/training/{job.public_id}/").status_code == 302
