"""Checkpoint-aware quarantine on the simulator: a quarantine of a node under a running training job waits for the
job's next checkpoint, then drains the node and runbook 3 resumes the job from that checkpoint around it (a spare
in its place; Slurm's resume excludes it); at the deadline it drains anyway; a job that keeps no checkpoints is
drained at once, the reason saying so.

One clock, set by the test (`clock`, tests/conftest.py): the remediation's `now=`, the rows' stamps and the simulated
job's log all read it, so the job's step lines and checkpoint saves are where the test expects them however long the
test takes."""

import datetime as dt

import pytest

from apps.diagnosis.choices import Cause, IncidentState, RemediationState
from apps.diagnosis.models import Incident
from apps.diagnosis.phases import Phase
from apps.health import services as health
from apps.health.choices import Severity, Source
from apps.inventory.models import Gpu, Node
from apps.jobs.choices import JobStatus
from apps.jobs.models import Job
from apps.jobs.services import TargetSpec, create_job
from apps.parsers.training_log import parse_training_log
from apps.remediation import services as remediation
from apps.remediation.choices import Action, Mode, Outcome
from apps.remediation.models import RemediationDecision, RemediationPolicy, Repair
from apps.simulator import services as sim
from apps.workloads.choices import Launcher, TrainingState
from apps.workloads.models import TrainingJob

# The clock first: the cluster and the job are stamped at the test's moment.
pytestmark = [pytest.mark.usefixtures("clock", "on_the_simulator"), pytest.mark.django_db(transaction=True)]

CKPT = "/checkpoints/llm-pretrain"


@pytest.fixture
def quarantine(settings, demo_cluster):
    settings.RACKPILOT_SCHEDULER_KIND = "slurm"
    settings.RACKPILOT_DIAGNOSIS_VERIFY_WAIT_SECONDS = 0
    RemediationPolicy.objects.all().delete()
    return RemediationPolicy.objects.create(
        name="xid79", kind_pattern="xid79", min_severity=Severity.CRITICAL, action=Action.QUARANTINE, mode=Mode.ON
    )


def read_progress(training_job, run_shards) -> TrainingJob:
    """The periodic progress read of the job's log (its step lines and checkpoint saves)."""
    first = training_job.members.get(node_rank=0).node
    job = create_job(
        kind="training-progress",
        targets=TargetSpec(nodes=(str(first.public_id),)),
        parameters={"training_job": str(training_job.public_id)},
        transport="sim",
        queue=False,
    )
    assert run_shards(job).status == JobStatus.SUCCEEDED
    training_job.refresh_from_db()
    return training_job


def xid79(hostname: str, at: dt.datetime, gpu: int = 2):
    return health.record_event(
        component=Gpu.objects.get(node__hostname=hostname, index=gpu),
        source=Source.TELEMETRY,
        kind="xid79",
        severity=Severity.CRITICAL,
        summary=f"GPU {gpu}: XID 79, GPU has fallen off the bus",
        at=at,
    )


def run_phase(incident, run_shards, phase):
    job = incident.jobs.filter(parameters__phase=phase).order_by("-created").first()
    assert job is not None, f"no {phase} job was started"
    run_shards(job)
    incident.refresh_from_db()
    return job


def test_the_drain_waits_for_the_next_checkpoint_then_the_job_resumes_from_it_around_the_node(
    quarantine, clock, training_job, run_shards, client, viewer
):
    start = clock.now
    before = read_progress(training_job, run_shards).last_checkpoint_step
    # Two hours in at 1.6 s a step (after 45 s of start-up): step 4471, the last save at 4400, the next at 4600 in
    # 205 s.
    assert before == 4400
    xid79("gpu002", start)

    (decision,) = remediation.evaluate(now=start, transport="sim", queue=False)
    assert decision.outcome == Outcome.DEFERRED and decision.training_job == training_job
    assert decision.drain_by == start + dt.timedelta(minutes=15)  # critical: 15 minutes at most
    assert decision.checkpoint_before == before and decision.gpus == 32
    assert decision.reason.startswith(f"Deferred: drain gpu002 at llm-pretrain's next checkpoint (after step {before})")
    assert not Node.objects.get(hostname="gpu002").is_drained and not Job.objects.filter(kind="scheduler-action")
    client.force_login(viewer)
    assert "Deferred to the next checkpoint (drained by" in client.get("/remediation/").content.decode()

    # A minute on, no new checkpoint yet: still waiting.
    clock.advance(minutes=1)
    read_progress(training_job, run_shards)
    assert remediation.settle_deferred(now=start + dt.timedelta(minutes=1), transport="sim", queue=False) == []

    # Six minutes on the job has saved its next checkpoint (every 200 steps of 1.6 s): drained now.
    clock.advance(minutes=6)
    saved = read_progress(training_job, run_shards).last_checkpoint_step
    assert saved == 4600
    (drained,) = remediation.settle_deferred(now=start + dt.timedelta(minutes=7), transport="sim", queue=False)
    drained.refresh_from_db()
    assert drained.outcome == Outcome.ACTED and drained.drained_at == start + dt.timedelta(minutes=7)
    assert f"llm-pretrain saved its checkpoint of step {saved}" in drained.reason
    assert run_shards(Job.objects.get(public_id=drained.job_id)).status == JobStatus.SUCCEEDED
    node = Node.objects.get(hostname="gpu002")
    assert node.is_drained and node.drained_at == drained.drained_at  # since the drain, not the decision (costs)
    # Drained, the node is in repair and its evidence is being captured (none while it only waited).
    repair = Repair.objects.get(node__hostname="gpu002")
    assert drained in repair.decisions.all() and repair.evidence_job_id is not None

    # Runbook 3 checks the checkpoints and resumes from the new one, gpu002 replaced by a spare of its SKU.
    incident = Incident.objects.get(public_id=drained.resume_incident)
    assert incident.runbook == "training-interrupted" and incident.node.hostname == "gpu002"
    run_phase(incident, run_shards, Phase.CHECKS)
    assert incident.cause == Cause.BAD_NODE
    remediation_row = incident.remediations.get()
    plan = remediation_row.plan
    assert plan["resume_step"] == saved and plan["automatic"]  # approved by the quarantining policy
    assert "gpu002" not in plan["hosts"] and set(plan["replaced"]) == {"gpu002"}
    spare = plan["replaced"]["gpu002"]
    assert Node.objects.get(hostname=spare).gpu_sku_id == Node.objects.get(hostname="gpu002").gpu_sku_id
    drained.refresh_from_db()
    assert drained.checkpoint_step == saved
    assert drained.drained_step == 4730 and drained.steps_lost == 130  # the newest step line at 7 min: step 4730
    assert drained.steps_lost < saved - before  # less lost than draining at once would have
    client.force_login(viewer)
    page = client.get("/remediation/").content.decode()
    assert f"resumes from step {saved}: {drained.steps_lost} steps lost on 32 GPUs" in page

    run_phase(incident, run_shards, Phase.FIX)
    clock.advance(minutes=10)
    run_phase(incident, run_shards, Phase.VERIFY)
    remediation_row.refresh_from_db()
    assert remediation_row.state == RemediationState.VERIFIED, remediation_row.outcome
    assert incident.state == IncidentState.RESOLVED
    training_job.refresh_from_db()
    hosts = [m.node.hostname for m in training_job.members.order_by("node_rank")]
    assert "gpu002" not in hosts and spare in hosts and training_job.state == TrainingState.RUNNING
    log = sim.run_command(node=Node.objects.get(hostname=hosts[0]), argv=["cat", training_job.log_path]).stdout
    run = parse_training_log(log)
    assert run.resumed_from == saved and run.last_step > saved
    assert "Received Signals.SIGTERM death signal" in log  # the running attempt was stopped for the resume
    # And the progress reads follow the resumed run on its new node rank 0.
    assert read_progress(training_job, run_shards).progress.order_by("-time").first().step > saved


def test_at_the_deadline_it_drains_anyway_and_slurm_resumes_excluding_the_node(
    quarantine, clock, training_job, run_shards
):
    TrainingJob.objects.filter(pk=training_job.pk).update(launcher=Launcher.SLURM)
    start = clock.now
    before = read_progress(training_job, run_shards).last_checkpoint_step
    xid79("gpu003", start)
    (decision,) = remediation.evaluate(now=start, transport="sim", queue=False)
    assert decision.outcome == Outcome.DEFERRED
    xid79("gpu003", start + dt.timedelta(minutes=1), gpu=5)  # a second GPU of the node: one drain, one resume
    (second,) = remediation.evaluate(now=start + dt.timedelta(minutes=1), transport="sim", queue=False)
    assert second.outcome == Outcome.REFUSED and "already" in second.reason
    assert remediation.settle_deferred(now=start + dt.timedelta(minutes=14), transport="sim", queue=False) == []

    (drained,) = remediation.settle_deferred(now=start + dt.timedelta(minutes=15), transport="sim", queue=False)
    drained.refresh_from_db()
    assert drained.outcome == Outcome.ACTED
    assert f"deadline reached with no new checkpoint of llm-pretrain (the newest: {before})" in drained.reason
    assert drained.checkpoint_step == before and drained.steps_lost == drained.drained_step - before

    incident = Incident.objects.get(public_id=drained.resume_incident)
    run_phase(incident, run_shards, Phase.CHECKS)
    fix = incident.remediations.get()
    assert fix.plan["resume_step"] == before and "gpu003" not in fix.plan["hosts"]
    (command,) = fix.commands
    assert command["command"] == "resume-sbatch-excluding" and dict(command["values"])["excluded_nodes"] == "gpu003"


def test_a_job_without_checkpoints_is_drained_at_once_and_the_reason_says_so(quarantine, clock, training_job):
    TrainingJob.objects.filter(pk=training_job.pk).update(checkpoint_dir="")
    start = clock.now
    xid79("gpu004", start)
    (decision,) = remediation.evaluate(now=start, transport="sim", queue=False)
    assert decision.outcome == Outcome.ACTED and decision.job_id is not None
    assert "llm-pretrain runs on gpu004 with no checkpoints configured: drained at once" in decision.reason
    assert Node.objects.get(hostname="gpu004").is_drained
    assert decision.training_job_id == training_job.pk and decision.drain_by is None


def test_a_node_under_no_running_job_is_drained_at_once(quarantine, clock, training_job):
    TrainingJob.objects.filter(pk=training_job.pk).update(state=TrainingState.COMPLETED)
    xid79("gpu001", clock.now)
    (decision,) = remediation.evaluate(now=clock.now, transport="sim", queue=False)
    assert decision.outcome == Outcome.ACTED and decision.training_job is None
    assert RemediationDecision.objects.get().reason.startswith("Started: drain gpu001")


def test_two_nodes_of_one_job_drained_together_are_resumed_around_by_one_incident(
    quarantine, clock, training_job, run_shards
):
    RemediationPolicy.objects.update(breaker_max_percent=100)
    start = clock.now
    read_progress(training_job, run_shards)
    xid79("gpu002", start)
    xid79("gpu003", start)
    assert [d.outcome for d in remediation.evaluate(now=start, transport="sim", queue=False)] == [
        Outcome.DEFERRED,
        Outcome.DEFERRED,
    ]
    drained = remediation.settle_deferred(now=start + dt.timedelta(minutes=15), transport="sim", queue=False)
    assert [d.outcome for d in drained] == [Outcome.ACTED, Outcome.ACTED]
    assert drained[0].resume_incident == drained[1].resume_incident
    (incident,) = Incident.objects.all()
    run_phase(incident, run_shards, Phase.CHECKS)
    plan = incident.remediations.get().plan
    assert set(plan["replaced"]) == {"gpu002", "gpu003"} and not {"gpu002", "gpu003"} & set(plan["hosts"])


def test_a_job_that_stopped_stepping_is_drained_at_once_no_checkpoint_is_coming(
    quarantine, clock, training_job, run_shards
):
    start = clock.now
    read_progress(training_job, run_shards)
    later = start + dt.timedelta(minutes=30)  # its newest step line is half an hour old: the fault crashed it
    xid79("gpu002", later)
    (decision,) = remediation.evaluate(now=later, transport="sim", queue=False)
    assert decision.outcome == Outcome.ACTED and decision.drain_by is None
    assert "llm-pretrain runs on gpu002; drained at once: it has logged no step for" in decision.reason
    assert "so no checkpoint is coming" in decision.reason and Node.objects.get(hostname="gpu002").is_drained


def test_a_save_due_after_the_deadline_is_not_waited_for(quarantine, clock, training_job, run_shards):
    start = clock.now
    read_progress(training_job, run_shards)
    TrainingJob.objects.filter(pk=training_job.pk).update(checkpoint_interval_steps=100_000)  # a save every ~44 h
    xid79("gpu002", start)
    (decision,) = remediation.evaluate(now=start, transport="sim", queue=False)
    assert decision.outcome == Outcome.ACTED and decision.drain_by is None
    assert "drained at once: its next checkpoint is due in about" in decision.reason
    assert "after the 15-minute deadline" in decision.reason
