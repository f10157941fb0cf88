"""The scheduler-action kind: kubectl cordon/drain/uncordon or scontrol update, run on the controller over sim."""

from types import SimpleNamespace

import pytest
from rest_framework import serializers

from apps.deployments.node_operations import scheduler_commands
from apps.jobs import services as jobs
from apps.jobs.choices import JobStatus
from apps.simulator.shell import run as sim_run
from apps.simulator.terminal import Context

pytestmark = pytest.mark.django_db


def test_the_commands_shown_quote_the_reason_as_one_word():
    assert scheduler_commands(scheduler="slurm", action="drain", node="gpu001", reason="fan swap (ticket 42)") == [
        "scontrol update NodeName=gpu001 State=DRAIN 'Reason=fan swap (ticket 42)'",
        "scontrol show node -o gpu001",  # the read back that decides whether Slurm did it
    ]
    assert scheduler_commands(scheduler="kubernetes", action="drain", node="gpu001") == [
        "kubectl cordon gpu001",
        "kubectl taint nodes gpu001 rackpilot.io/quarantine=rackpilot:NoSchedule --overwrite",  # no reason given
        "kubectl drain gpu001 --ignore-daemonsets --delete-emptydir-data",
        "kubectl get node gpu001 -o json",
    ]
    assert scheduler_commands(scheduler="kubernetes", action="undrain", node="gpu001") == [
        "kubectl taint nodes gpu001 rackpilot.io/quarantine:NoSchedule-",
        "kubectl uncordon gpu001",
        "kubectl get node gpu001 -o json",
    ]


@pytest.mark.parametrize(
    ("parameters", "field"),
    [
        ({"scheduler": "slurm", "action": "drain", "node": "gpu001", "reason": "x'; rm -rf /"}, "reason"),
        ({"scheduler": "slurm", "action": "drain", "node": "gpu001"}, "reason"),
        ({"scheduler": "slurm", "action": "drain", "node": "gpu001;reboot", "reason": "fan"}, "node"),
        ({"scheduler": "pbs", "action": "drain", "node": "gpu001"}, "scheduler"),
    ],
)
def test_bad_parameters_are_refused_naming_the_field(demo_cluster, parameters, field):
    with pytest.raises(serializers.ValidationError) as raised:
        jobs.create_job(
            kind="scheduler-action", targets=jobs.TargetSpec(nodes=("mgmt01",)), parameters=parameters, queue=False
        )
    assert field in raised.value.detail["parameters"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("scheduler", "action", "steps"),
    [
        ("kubernetes", "drain", {"kubectl-cordon", "kubectl-taint-quarantine", "kubectl-drain", "verify"}),
        # Not quarantined: the taint's removal finds none, the read back says done.
        ("kubernetes", "undrain", {"kubectl-untaint-quarantine", "kubectl-uncordon", "verify"}),
        ("slurm", "drain", {"scontrol-drain", "verify"}),
        ("slurm", "undrain", {"scontrol-resume", "verify"}),  # not drained: Slurm refuses, the read back says done
        ("slurm", "reboot", {"scontrol-reboot-asap", "verify"}),
    ],
)
def test_the_job_runs_on_the_controller_over_sim(demo_cluster, run_shards, scheduler, action, steps):
    job = jobs.create_job(
        kind="scheduler-action",
        targets=jobs.TargetSpec(nodes=("mgmt01",)),
        parameters={"scheduler": scheduler, "action": action, "node": "gpu003", "reason": "PSU swap"},
        transport="sim",
        queue=False,
    )
    job = run_shards(job)
    assert job.status == JobStatus.SUCCEEDED
    assert set(job.steps.values_list("step", flat=True)) == steps


def test_the_simulator_answers_as_kubectl_and_scontrol_do():
    context = Context(
        state=SimpleNamespace(slurm_nodes={}),
        hostname="mgmt01",
        peers=lambda name: object() if name == "gpu003" else None,
    )
    assert sim_run(context, ["kubectl", "cordon", "gpu003"]).stdout == "node/gpu003 cordoned\n"
    drained = sim_run(context, ["kubectl", "drain", "gpu003", "--ignore-daemonsets", "--delete-emptydir-data"])
    assert drained.stdout.endswith("node/gpu003 drained\n") and "DaemonSet-managed Pods" in drained.stderr
    missing = sim_run(context, ["kubectl", "uncordon", "nosuch"])
    assert missing.exit_code == 1 and missing.stderr == 'Error from server (NotFound): nodes "nosuch" not found\n'
    assert sim_run(context, ["scontrol", "update", "NodeName=gpu003", "State=DRAIN", "Reason=fan"]).exit_code == 0
    refused = sim_run(context, ["scontrol", "update", "NodeName=gpu003", "State=DRAIN"])
    assert refused.exit_code == 1 and "specify a reason" in refused.stderr


def test_the_scheduler_comes_from_the_setting_when_the_job_names_none(demo_cluster, settings):
    settings.RACKPILOT_SCHEDULER_KIND = "slurm"
    job = jobs.create_job(
        kind="scheduler-action",
        targets=jobs.TargetSpec(nodes=("mgmt01",)),
        parameters={"action": "drain", "node": "gpu003", "reason": "PSU swap"},
        transport="sim",
        queue=False,
    )
    assert job.parameters["scheduler"] == "slurm"
    assert list(job.steps.values_list("step", flat=True)) == ["scontrol-drain", "verify"]
