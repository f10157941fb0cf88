"""Paths a kind reads on a node are confined to what the kind is for (issue 27, drills 1: a training job's log_path
of /etc/shadow was tailed over `local` and served to viewers). A training job's log must lie under
RACKPILOT_TRAINING_LOG_DIRS and its checkpoints under RACKPILOT_CHECKPOINT_DIRS, in normal form; this is checked
where the path is typed and again wherever a command is built from it (every transport); the kinds that read such
files never run over `local`; their output is no log event and their artifacts are for operators."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.exceptions import ValidationError

from apps.diagnosis import recovery, runbook
from apps.inventory.models import Node
from apps.jobs.kinds import JobKind, register_kind
from apps.jobs.models import Artifact, Job, JobEvent
from apps.jobs.services import TargetSpec, create_job
from apps.monitoring import progress
from apps.nodeexec import catalogue
from apps.nodeexec.catalogue import CommandError
from apps.workloads.choices import TrainingState
from apps.workloads.models import TrainingJob, TrainingJobNode
from tests import factories

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_the_simulator")]

ESCAPES = [
    "/etc/shadow",
    "/var/log/train/../../../etc/shadow",
    "/var/log/train/./../x.log",
    "/var/log/train//x.log",
    "/var/log/training-evil/x.log",  # a sibling whose name starts like an allowed directory
    "/var/log/train",  # the directory itself is no log file
    "var/log/train/x.log",
]


@pytest.fixture
def nodes(db):
    return [factories.make_node(hostname=hostname) for hostname in ("gpu001", "gpu002")]


@pytest.fixture
def training_job(nodes):
    return _training_job()


def _training_job():
    job = TrainingJob.objects.create(
        name="llm-pretrain",
        checkpoint_dir="/checkpoints/llm-pretrain",
        log_path="/var/log/train/llm-pretrain.log",
        state=TrainingState.RUNNING,
        started_at=timezone.now() - timedelta(minutes=30),
    )
    for rank, hostname in enumerate(("gpu001", "gpu002")):
        TrainingJobNode.objects.create(job=job, node=Node.objects.get(hostname=hostname), node_rank=rank)
    return job


@pytest.mark.parametrize("path", ESCAPES)
def test_a_log_path_outside_the_log_directories_is_refused_by_the_api(training_job, api_as, operator, path):
    answer = api_as(operator).patch(f"/api/training-jobs/{training_job.public_id}/", {"log_path": path}, format="json")
    assert answer.status_code == 400 and "log_path" in answer.json()
    training_job.refresh_from_db()
    assert training_job.log_path == "/var/log/train/llm-pretrain.log"


@pytest.mark.parametrize("path", ["/etc", "/root/.ssh", "/checkpoints/../etc", "/"])
def test_a_checkpoint_directory_outside_the_checkpoint_directories_is_refused(training_job, api_as, operator, path):
    url = f"/api/training-jobs/{training_job.public_id}/"
    answer = api_as(operator).patch(url, {"checkpoint_dir": path}, format="json")
    assert answer.status_code == 400 and "checkpoint_dir" in answer.json()


def test_the_setting_names_the_log_directories(training_job, api_as, operator, settings):
    settings.RACKPILOT_TRAINING_LOG_DIRS = ["/srv/logs"]
    url = f"/api/training-jobs/{training_job.public_id}/"
    assert api_as(operator).patch(url, {"log_path": "/srv/logs/run.log"}, format="json").status_code == 200
    refused = api_as(operator).patch(url, {"log_path": "/var/log/train/run.log"}, format="json")
    assert "/srv/logs" in str(refused.json()["log_path"])


@pytest.mark.parametrize("path", ESCAPES)
def test_every_read_of_a_log_or_checkpoint_is_checked_where_its_command_is_built(path):
    with pytest.raises(CommandError):
        catalogue.build("tail-log", number=10, log_file=path)
    with pytest.raises(CommandError):
        runbook.log_read(path).argv()
    for read in recovery.checkpoint_reads("/etc", 1000):
        with pytest.raises(CommandError):
            read.argv()
    with pytest.raises(CommandError):
        catalogue.build("remove-checkpoint", checkpoint_step_dir="/etc/x/step_0001000")
    assert catalogue.build("tail-log", number=10, log_file="/var/log/train/a.log")[-1] == "/var/log/train/a.log"


def test_a_log_path_stored_before_the_check_is_not_read(training_job):
    TrainingJob.objects.filter(pk=training_job.pk).update(log_path="/var/log/train/../../../etc/shadow")
    with pytest.raises(ValidationError) as refused:
        create_job(
            kind="training-progress",
            targets=TargetSpec(nodes=("gpu001",)),
            parameters={"training_job": str(training_job.public_id)},
            transport="ssh",
        )
    assert "training_job" in refused.value.detail["parameters"]
    assert progress.schedule_reads() == []  # the schedule skips it instead of failing every minute
    assert not Job.objects.exists()


def test_training_progress_is_not_run_over_local(training_job, api_as, operator):
    answer = api_as(operator).post(
        "/api/jobs/",
        {
            "kind": "training-progress",
            "targets": {"nodes": ["gpu001"]},
            "parameters": {"training_job": str(training_job.public_id)},
            "transport": "local",
        },
        format="json",
    )
    assert answer.status_code == 400 and "transport" in answer.json()
    assert not Job.objects.exists()


def test_a_kind_that_reads_named_files_cannot_be_registered_for_local():
    class Reader(JobKind):
        name = "reads-named-files"
        private_output = True

    with pytest.raises(TypeError, match="local"):
        register_kind(Reader)


@pytest.mark.django_db(transaction=True)
def test_the_log_read_is_for_operators_and_its_progress_for_everyone(
    demo_cluster, run_shards, api_as, browser_as, viewer, operator
):
    training_job = _training_job()
    (job,) = progress.schedule_reads()
    run_shards(job)
    artifact = Artifact.objects.get(step__job=job, stream="stdout")
    url = f"/api/jobs/{job.public_id}/artifacts/{artifact.public_id}/"
    assert api_as(viewer).get(url).status_code == 403
    answer = api_as(operator).get(url)
    assert answer.status_code == 200 and b"iteration" in answer.content
    # the log's lines are not events (every role reads those), only the note saying where they are
    messages = [row["message"] for row in api_as(viewer).get(f"/api/jobs/{job.public_id}/events/").json()["events"]]
    assert not any("iteration" in message for message in messages)
    assert JobEvent.objects.filter(job=job, level="output").count() == 0
    assert any("kept in the step's artifact" in message for message in messages)
    cell = browser_as(viewer).get(f"/jobs/{job.public_id}/cells/gpu001/log/")
    assert cell.status_code == 200 and str(artifact.public_id) not in cell.content.decode()
    cell = browser_as(operator).get(f"/jobs/{job.public_id}/cells/gpu001/log/")
    assert str(artifact.public_id) in cell.content.decode()
    assert training_job.progress.exists()  # the parsed progress is what everyone sees


def test_timeline_traces_are_not_read_off_the_workers_own_host(nodes, api_as, operator):
    trace = {"node": "gpu001", "path": "/var/log/traces/rank0.json"}
    client = api_as(operator)
    answer = client.post(
        "/api/benchmark-timelines/from-nodes/", {"files": [trace], "transport": "local"}, format="json"
    )
    assert answer.status_code == 400 and "transport" in answer.json()
    answer = client.post(
        "/api/jobs/",
        {
            "kind": "timeline-trace",
            "targets": {"nodes": ["gpu001"]},
            "parameters": {"files": [trace]},
            "transport": "local",
        },
        format="json",
    )
    assert answer.status_code == 400 and "transport" in answer.json()
    assert not Job.objects.exists()
