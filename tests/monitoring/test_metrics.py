"""Rackpilot's /metrics: what it counts, who may read it, that promtool accepts it, that a scrape writes nothing."""

import shutil
import subprocess

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from apps.jobs.choices import JobStatus
from apps.jobs.models import Job
from apps.monitoring.metrics import FAMILIES, registry
from apps.monitoring.models import Bmc
from apps.parsers.training_log import parse_progress
from apps.workloads import services as workloads
from apps.workloads.choices import TrainingState
from apps.workloads.models import TrainingJob
from tests.live_server import need

pytestmark = pytest.mark.django_db


def _samples(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.fixture
def jobs():
    Job.objects.create(kind="gpu-count", transport="sim", status=JobStatus.SUCCEEDED, last_seq=12)
    Job.objects.create(kind="gpu-count", transport="sim", status=JobStatus.SUCCEEDED, last_seq=8)
    Job.objects.create(kind="bmc-poll", transport="sim", status=JobStatus.FAILED, last_seq=3)
    Job.objects.create(kind="bmc-poll", transport="sim", status=JobStatus.RUNNING, last_seq=1)


def test_jobs_by_kind_and_state_and_events_written(client, jobs):
    response = client.get("/metrics")

    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain; version=0.0.4")
    samples = _samples(response.content.decode())
    finished = "rackpilot_jobs_finished_total"
    assert samples[finished, (("kind", "gpu-count"), ("status", "succeeded"))] == 2
    assert samples[finished, (("kind", "bmc-poll"), ("status", "failed"))] == 1
    assert samples["rackpilot_jobs_active", (("kind", "bmc-poll"), ("status", "running"))] == 1
    assert samples["rackpilot_job_events_total", ()] == 24


def test_bmc_poll_results_and_last_results(client, gpu_node, sim_bmc):
    sim_bmc()
    Bmc.objects.update(polls_ok=5, polls_partial=1, polls_failed=2, last_result="auth_failed")

    samples = _samples(client.get("/metrics").content.decode())

    assert samples["rackpilot_bmc_polls_total", (("result", "ok"),)] == 5
    assert samples["rackpilot_bmc_polls_total", (("result", "failed"),)] == 2
    assert samples["rackpilot_bmcs", (("last_result", "auth_failed"),)] == 1


def test_verdicts_of_benchmarks_and_deployments_are_counted(client):
    text = client.get("/metrics").content.decode()

    assert "# TYPE rackpilot_verdicts_total counter" in text


def test_counters_come_from_the_database_so_a_new_process_reads_the_same(jobs):
    first = _samples(generate_latest(registry()).decode())
    Job.objects.create(kind="gpu-count", transport="sim", status=JobStatus.SUCCEEDED, last_seq=5)

    again = _samples(generate_latest(registry()).decode())  # a fresh registry: what a restarted process answers

    key = ("rackpilot_jobs_finished_total", (("kind", "gpu-count"), ("status", "succeeded")))
    assert (first[key], again[key]) == (2, 3)
    assert again["rackpilot_job_events_total", ()] == first["rackpilot_job_events_total", ()] + 5


def test_a_scrape_writes_nothing(client, jobs):
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/metrics").status_code == 200

    statements = [query["sql"].lstrip().split()[0].upper() for query in queries.captured_queries]
    assert set(statements) <= {"SELECT"}


def test_only_get(client):
    assert client.post("/metrics").status_code == 405


def test_a_token_when_one_is_set(client, settings):
    settings.RACKPILOT_METRICS_TOKEN = "scrape-token-123"

    refused = client.get("/metrics")
    wrong = client.get("/metrics", HTTP_AUTHORIZATION="Bearer nope")
    allowed = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-token-123")

    assert (refused.status_code, wrong.status_code, allowed.status_code) == (401, 401, 200)
    assert refused["WWW-Authenticate"].startswith("Bearer")
    assert b"scrape-token-123" not in refused.content + allowed.content


def test_no_credentials_in_the_output(client, sim_bmc, settings):
    sim_bmc()

    text = client.get("/metrics").content.decode()

    assert settings.RACKPILOT_SIM_BMC_PASSWORD not in text and settings.SECRET_KEY not in text


@pytest.fixture
def training_progress(db):
    """Two training jobs with step lines read from their logs: one running, one finished."""
    line = (
        " [2026-12-01 06:24:44] iteration {step:>8}/  500000 | consumed samples:       614400 | elapsed time per "
        "iteration (ms): 1600.0 | learning rate: 3.000000E-04 | global batch size:   512 | lm loss: {loss} | "
        "loss scale: 1.0 | grad norm: 0.812 | number of skipped iterations:   0 | number of nan iterations:   0 |"
    )
    running = TrainingJob.objects.create(name="llm-pretrain", state=TrainingState.RUNNING)
    done = TrainingJob.objects.create(name="old-run", state=TrainingState.COMPLETED)
    workloads.record_progress(job=running, points=parse_progress(line.format(step=1200, loss="2.345678E+00")))
    workloads.record_progress(job=done, points=parse_progress(line.format(step=90, loss="9.0E+00")))
    return running


def test_the_newest_step_of_each_active_training_job(client, training_progress):
    samples = _samples(client.get("/metrics").content.decode())

    labels = (("training_job", "llm-pretrain"),)
    assert samples["rackpilot_training_step", labels] == 1200
    assert samples["rackpilot_training_loss", labels] == pytest.approx(2.345678)
    assert samples["rackpilot_training_samples_per_second", labels] == pytest.approx(320.0)
    assert samples["rackpilot_training_step_timestamp_seconds", labels] == 1796106284  # 2026-12-01 06:24:44 UTC
    assert not any(key[1] == (("training_job", "old-run"),) for key in samples)  # a finished job is not exposed


def test_promtool_accepts_the_names(client, jobs, sim_bmc, training_progress):
    need(shutil.which("promtool"), "needs promtool (apt-get install prometheus)")
    sim_bmc()
    text = client.get("/metrics").content

    checked = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, timeout=30)

    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()
    assert checked.stdout.decode().strip() == "" and checked.stderr.decode().strip() == ""  # not even a lint warning
    declared = {family.name for family in text_string_to_metric_families(text.decode())}
    assert {name.removesuffix("_total") for name in FAMILIES} == declared
