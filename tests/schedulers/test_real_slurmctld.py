"""Rackpilot against a real Slurm controller (Debian's slurmctld 22.05, private to the test, tests/schedulers/
slurmctld.py): the scheduler-action kind drains, resumes and reboots through the real `scontrol` over the local
transport, the real `sinfo` shows what it did, and the readback stores the controller's view. Skipped where Slurm is
not installed, failed in CI (.ci/run installs slurmctld and slurm-client).

The declared nodes have no slurmd: Slurm keeps them UNKNOWN (later NOT_RESPONDING). A drain works on them as on any
node; a resume clears the drain yet scontrol still exits 1 with "Invalid node state specified" (Slurm 22.05.8,
checked by hand), which is why the action reads the node back and judges by what it reads."""

import pytest

from apps.jobs import services as jobs
from apps.jobs.choices import JobStatus, StepStatus
from apps.parsers.slurm import SINFO_FORMAT, parse_show_nodes, parse_sinfo_nodes
from apps.schedulers import services
from apps.schedulers.choices import DifferenceKind
from apps.schedulers.models import SchedulerNodeState
from tests.live_server import need

from .slurmctld import missing_binaries, start_controller

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def slurm(demo_cluster, tmp_path, monkeypatch):
    missing = missing_binaries()
    need(not missing, f"Slurm is not installed here ({', '.join(missing)} missing): apt-get install slurmctld")
    nodes = list(services.scheduled_nodes().order_by("hostname").values_list("hostname", flat=True))
    controller = start_controller(tmp_path / "slurm", nodes)
    monkeypatch.setenv("SLURM_CONF", str(controller.conf))  # what the local transport's scontrol reads
    yield controller
    controller.stop()


def action(run_shards, **parameters):
    job = jobs.create_job(
        kind="scheduler-action",
        targets=jobs.TargetSpec(nodes=(services.scheduler_controller().hostname,)),
        parameters={"scheduler": "slurm", **parameters},
        transport="local",
        queue=False,
    )
    return run_shards(job)


def sinfo(slurm) -> dict:
    answer = slurm.run("sinfo", "-N", "-h", "-o", SINFO_FORMAT)
    assert answer.returncode == 0, answer.stderr
    return parse_sinfo_nodes(answer.stdout).by_name()


def test_drain_readback_and_resume_through_the_real_controller(slurm, run_shards):
    reason = "xid 79 on GPU 3: fell off the bus"
    drained = action(run_shards, action="drain", node="gpu003", reason=reason)
    assert drained.status == JobStatus.SUCCEEDED, list(drained.steps.values_list("step", "summary"))
    listed = sinfo(slurm)["gpu003"]
    assert (listed.drain_state, listed.reason) == ("DRAINED", reason)
    assert not sinfo(slurm)["gpu004"].drained

    readback = run_shards(services.start_readback(transport="local", scheduler="slurm"))
    assert readback.status == JobStatus.SUCCEEDED
    view = SchedulerNodeState.objects.get(node__hostname="gpu003")
    # No slurmd answers: UNKNOWN, or DOWN once SlurmdTimeout (300 s) has passed on a slow machine.
    assert (view.drain_state, view.reason) == ("drained", reason) and view.state in ("UNKNOWN", "DOWN")
    assert "DRAIN" in view.flags and view.reason_by and view.reason_at is not None
    assert SchedulerNodeState.objects.filter(present=True).count() == services.scheduled_nodes().count()
    outside = [d for d in services.scheduler_differences() if d.kind == DifferenceKind.DRAINED_OUTSIDE]
    assert [(d.hostname, d.reason) for d in outside] == [("gpu003", reason)]  # the inventory still says in service

    resumed = action(run_shards, action="undrain", node="gpu003")
    resume, verify = resumed.steps.get(step="scontrol-resume"), resumed.steps.get(step="verify")
    assert resumed.status == JobStatus.SUCCEEDED and resume.status == StepStatus.SUCCEEDED
    # Slurm 22.05 clears the drain of a node whose slurmd never answered yet exits 1 saying so:
    assert "Invalid node state specified" in resume.summary or view.state == "DOWN"
    assert verify.status == StepStatus.SUCCEEDED and not sinfo(slurm)["gpu003"].drained
    view.refresh_from_db()
    assert (view.drain_state, view.reason) == ("", "")


def test_reboot_asap_is_drained_with_the_reason_and_resumes_next(slurm, run_shards):
    job = action(run_shards, action="reboot", node="gpu005", reason="firmware 2.1")
    assert job.status == JobStatus.SUCCEEDED, list(job.steps.values_list("step", "summary"))
    shown = slurm.run("scontrol", "show", "node", "-o", "gpu005").stdout
    (node,) = parse_show_nodes(shown).nodes
    assert {"DRAIN", "REBOOT_REQUESTED"} <= set(node.flags) and node.reason == "firmware 2.1"
    assert " NextState=RESUME " in shown
    assert sinfo(slurm)["gpu005"].state == "REBOOT"


def test_a_node_the_controller_does_not_know_fails_the_job_with_slurms_words(slurm, run_shards, settings):
    job = action(run_shards, action="drain", node="nosuchnode", reason="test")
    drain = job.steps.get(step="scontrol-drain")
    assert job.status == JobStatus.FAILED and drain.status == StepStatus.FAILED
    assert "Invalid node name specified" in drain.summary
    assert job.steps.get(step="verify").status == StepStatus.SKIPPED
    assert not any(node.drained for node in sinfo(slurm).values())
