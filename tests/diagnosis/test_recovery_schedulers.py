"""Runbook 3's resume for a Slurm and a Kubernetes training job, run on the scheduler's controller through the jobs
engine: the exact commands shown first, a viewer refused, the operator's approval (or the automatic policy, with
its bounded retries), the simulated controller answering, and the simulated job resuming from the chosen step."""

import pytest

from apps.diagnosis import services
from apps.diagnosis.choices import Cause, IncidentState, RemediationState
from apps.diagnosis.phases import Phase
from apps.inventory.models import Node
from apps.jobs.models import JobStep
from apps.parsers.training_log import parse_training_log
from apps.simulator import services as sim
from apps.workloads.choices import Launcher, RecoveryPolicy

pytestmark = pytest.mark.usefixtures("on_the_simulator")

CKPT = "/checkpoints/llm-pretrain"


def _diagnose(training_job, operator, run_phase):
    incident = services.open_incident(
        user=operator, training_job=training_job, transport="sim", runbook="training-interrupted"
    )
    services.start_runbook(incident=incident, user=operator)
    run_phase(incident, Phase.LOG)
    run_phase(incident, Phase.CHECKS)
    return incident


def _launched(training_job, launcher):
    training_job.launcher = launcher
    training_job.save()
    return Node.objects.filter(role="management").order_by("hostname").first().hostname


def _resumed_log(training_job, host):
    log = sim.run_command(node=Node.objects.get(hostname=host), argv=["cat", training_job.log_path]).stdout
    return parse_training_log(log)


@pytest.mark.django_db(transaction=True)
def test_slurm_resume_is_an_sbatch_on_the_controller_excluding_the_bad_node(
    training_job, inject, age_changes, operator, run_phase, settings
):
    settings.RACKPILOT_DIAGNOSIS_VERIFY_WAIT_SECONDS = 0
    controller = _launched(training_job, Launcher.SLURM)
    inject("gpu002", "xid79", "3", minutes_ago=40)
    incident = _diagnose(training_job, operator, run_phase)
    assert incident.cause == Cause.BAD_NODE
    remediation = incident.remediations.get()
    spare = remediation.plan["replaced"]["gpu002"]
    step = remediation.plan["resume_step"]
    shown = services.dry_run(remediation=remediation)
    assert shown == [
        f"{controller}$ sbatch --job-name llm-pretrain --nodes 4 --nodelist gpu001,{spare},gpu003,gpu004 "
        f"--ntasks-per-node 1 --gpus-per-node 8 --exclude gpu002 {training_job.entrypoint} --load {CKPT} "
        f"--ckpt-step {step}"
    ]
    services.approve_remediation(remediation=remediation, user=operator)
    fix = run_phase(incident, Phase.FIX)
    cell = JobStep.objects.get(job=fix)
    assert cell.hostname == controller and cell.status == "succeeded"
    age_changes(10)
    run_phase(incident, Phase.VERIFY)
    remediation.refresh_from_db()
    assert remediation.state == RemediationState.VERIFIED, remediation.outcome
    run = _resumed_log(training_job, "gpu001")
    assert run.resumed_from == step and run.last_step > step
    training_job.refresh_from_db()
    hosts = [m.node.hostname for m in training_job.members.select_related("node").order_by("node_rank")]
    assert hosts == ["gpu001", spare, "gpu003", "gpu004"]


@pytest.mark.django_db(transaction=True)
def test_slurm_automatic_resumes_are_bounded(training_job, inject, operator, run_phase, settings):
    settings.RACKPILOT_DIAGNOSIS_VERIFY_WAIT_SECONDS = 0
    _launched(training_job, Launcher.SLURM)
    training_job.recovery_policy, training_job.recovery_max_retries = RecoveryPolicy.AUTOMATIC, 2
    training_job.save()
    inject("gpu001", "disk_full", "/checkpoints", minutes_ago=60)
    incident = _diagnose(training_job, operator, run_phase)
    for attempt in (1, 2):
        remediation = incident.remediations.order_by("-created").first()
        assert remediation.plan["automatic"] and remediation.approved_by is None, attempt
        assert any(c["command"] == "resume-sbatch" for c in remediation.commands)
        run_phase(incident, Phase.FIX)
        run_phase(incident, Phase.VERIFY)  # seconds after the submission: no steps yet, so it retries
        remediation.refresh_from_db()
        assert remediation.state == RemediationState.INEFFECTIVE
        if attempt == 1:
            run_phase(incident, Phase.LOG)
            run_phase(incident, Phase.CHECKS)
    assert incident.remediations.count() == 2 and incident.state == IncidentState.UNRESOLVED
    controller = Node.objects.filter(role="management").order_by("hostname").first()
    submitted = sim.run_command(node=controller, argv=["cat", "/var/spool/slurmctld/last_job_id"]).stdout
    assert submitted.strip() == "4212"  # two submissions, each its own job id


@pytest.mark.django_db(transaction=True)
def test_kubernetes_resume_applies_a_job_manifest_after_an_operator_approves(
    training_job, inject, age_changes, operator, viewer, run_phase, client, settings
):
    settings.RACKPILOT_DIAGNOSIS_VERIFY_WAIT_SECONDS = 0
    controller = _launched(training_job, Launcher.KUBERNETES)
    inject("gpu001", "disk_full", "/checkpoints", minutes_ago=60)
    incident = _diagnose(training_job, operator, run_phase)
    remediation = incident.remediations.get()
    step = remediation.plan["resume_step"]
    names = [c["command"] for c in remediation.commands]
    assert names[-2:] == ["write-file", "kubectl-apply"] and set(names[:-2]) == {"remove-checkpoint"}
    assert {c["hostname"] for c in remediation.commands[-2:]} == {controller}
    assert "kind: Job" in remediation.artefact and f'"--ckpt-step", "{step}"' in remediation.artefact
    shown = services.dry_run(remediation=remediation)
    assert shown[-1].startswith(f"{controller}$ kubectl apply -f /var/lib/rackpilot/resume/llm-pretrain-r")

    client.force_login(viewer)
    url = f"/api/incidents/{incident.public_id}/remediations/{remediation.public_id}/approve/"
    assert client.post(url).status_code == 403
    remediation.refresh_from_db()
    assert remediation.state == RemediationState.PROPOSED and remediation.fix_job is None

    services.approve_remediation(remediation=remediation, user=operator)
    fix = run_phase(incident, Phase.FIX)
    applied = JobStep.objects.get(job=fix, hostname=controller)
    assert applied.status == "succeeded"
    path = remediation.commands[-1]["values"]["path"]
    again = sim.run_command(node=Node.objects.get(hostname=controller), argv=["kubectl", "apply", "-f", path])
    name = path.rsplit("/", 1)[1].removesuffix(".yaml")
    assert again.stdout == f"job.batch/{name} unchanged\n"  # the first apply created it
    age_changes(10)
    run_phase(incident, Phase.VERIFY)
    remediation.refresh_from_db()
    assert remediation.state == RemediationState.VERIFIED, remediation.outcome
    run = _resumed_log(training_job, "gpu001")
    assert run.resumed_from == step and run.last_step > step
