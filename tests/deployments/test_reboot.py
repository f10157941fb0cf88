"""The reboot kind over the simulator: the node goes away and comes back as a new boot, the check compares the boot
ids and the GPUs; a node in service is refused unless forced; viewers cannot start it; the start is audited."""

import threading
import time

import pytest
from rest_framework import serializers

from apps.core.models import AuditEntry
from apps.deployments.kinds.reboot import reboot_plan
from apps.inventory import services as inventory
from apps.inventory.models import Node
from apps.jobs import services as jobs
from apps.jobs.choices import JobStatus, StepStatus
from apps.jobs.models import JobStep
from apps.simulator import services as simulator
from apps.simulator.models import SimChange

pytestmark = pytest.mark.django_db(transaction=True)

FAST = {"poll_seconds": 0.1, "down_timeout_seconds": 5, "up_timeout_seconds": 10}


@pytest.fixture(autouse=True)
def no_enqueue(monkeypatch):  # the tests run the shards themselves
    monkeypatch.setattr(jobs, "enqueue", lambda job: None)


@pytest.fixture
def quick_reboots(settings):
    settings.RACKPILOT_SIM_REBOOT_SECONDS = 0.6
    return settings


def drained(*hostnames):
    nodes = list(Node.objects.filter(hostname__in=hostnames))
    inventory.drain_nodes(nodes=nodes, reason="reboot after the driver change")
    return nodes


def start(*hostnames, user=None, **parameters):
    return jobs.create_job(
        kind="reboot",
        targets=jobs.TargetSpec(nodes=hostnames),
        parameters=FAST | parameters,
        transport="sim",
        requested_by=user,
        queue=False,
    )


def cells(job):
    return {(cell.hostname, cell.step): cell for cell in job.steps.all()}


def test_a_drained_node_reboots_goes_away_and_comes_back_as_a_new_boot(demo_cluster, quick_reboots, run_shards):
    node = drained("gpu001")[0]
    simulator.run_command(node=node, argv=["nvidia-smi", "-i", "0", "-pl", "450"])  # lives in the driver only
    before = simulator.run_command(node=node, argv=["cat", "/proc/sys/kernel/random/boot_id"]).stdout.strip()

    job = run_shards(start("gpu001"))

    assert job.status == JobStatus.SUCCEEDED, [(c.step, c.summary) for c in job.steps.all()]
    matrix = cells(job)
    assert [cell.step for cell in job.steps.order_by("position")] == ["before", "reboot", "down", "up", "check"]
    assert matrix["gpu001", "before"].summary.startswith(f"boot id {before};")
    assert matrix["gpu001", "down"].summary.startswith("stopped answering after")
    assert "Connection refused" in matrix["gpu001", "down"].summary
    assert matrix["gpu001", "up"].summary.startswith("answering over SSH after")
    after = simulator.run_command(node=node, argv=["cat", "/proc/sys/kernel/random/boot_id"]).stdout.strip()
    assert after != before
    assert matrix["gpu001", "check"].summary == f"rebooted: boot id {before} → {after}, 8 of 8 GPUs"
    assert not SimChange.objects.filter(node=node, key__startswith="gpu:").exists()  # the power limit is gone
    uptime = simulator.run_command(node=node, argv=["uptime"]).stdout
    assert " up 0 min," in uptime


def test_the_simulated_reboot_is_away_for_a_while_and_its_boot_ids_follow_the_seed(demo_cluster, quick_reboots):
    node = Node.objects.get(hostname="gpu002")
    read = ["cat", "/proc/sys/kernel/random/boot_id"]
    first = simulator.run_command(node=node, argv=read, seed=7).stdout
    session = simulator.NodeSession(node, seed=7)
    assert session.run(["systemctl", "reboot"]).exit_code == 0
    refused = simulator.run_command(node=node, argv=read, seed=7)
    assert (refused.exit_code, refused.stderr) == (255, "ssh: connect to host gpu002 port 22: Connection refused\n")
    boot = SimChange.objects.get(node=node, key="boot:last").value
    assert boot["count"] == 1 and 0.48 <= boot["down_seconds"] <= 0.72
    SimChange.objects.filter(node=node, key="boot:last").update(value=boot | {"at": boot["at"] - 1})  # time passes
    second = simulator.run_command(node=node, argv=read, seed=7).stdout
    assert second != first and len(second.strip()) == 36
    assert simulator.run_command(node=node, argv=read, seed=7).stdout == second  # the same boot, the same id
    assert simulator.run_command(node=node, argv=read, seed=8).stdout != second  # another seed, another id


def test_a_node_in_service_is_refused_unless_forced(demo_cluster, quick_reboots, run_shards):
    with pytest.raises(serializers.ValidationError) as refused:
        start("gpu001")
    assert "Not drained: gpu001" in str(refused.value.detail["targets"])
    assert not jobs.Job.objects.exists()
    job = run_shards(start("gpu001", force=True))
    assert job.status == JobStatus.SUCCEEDED


def test_a_node_that_never_goes_away_fails_the_down_step_and_skips_the_rest(demo_cluster, settings, run_shards):
    settings.RACKPILOT_SIM_REBOOT_SECONDS = 0  # comes back within the same instant...
    drained("gpu003")
    original = simulator.reboot

    def no_reboot(*, node, seed=0, down_seconds=0.0):  # ...or rather never reboots at all: the command is lost
        return 0

    simulator.reboot = no_reboot
    try:
        job = run_shards(start("gpu003", down_timeout_seconds=5, poll_seconds=1))
    finally:
        simulator.reboot = original
    matrix = cells(job)
    assert job.status == JobStatus.FAILED
    assert matrix["gpu003", "down"].status == StepStatus.FAILED
    assert matrix["gpu003", "down"].summary == "still answering after 5 s: did it reboot?"
    assert {matrix["gpu003", step].status for step in ("up", "check")} == {StepStatus.SKIPPED}


def test_a_missing_gpu_after_the_reboot_fails_the_check(demo_cluster, quick_reboots, run_shards):
    node = drained("gpu004")[0]
    simulator.inject_fault(node=node, kind="xid79", target="3")
    job = run_shards(start("gpu004"))
    check = cells(job)["gpu004", "check"]
    assert job.status == JobStatus.FAILED and check.status == StepStatus.FAILED
    assert check.summary == "7 of 8 GPUs after the reboot"


def test_the_plan_names_the_exact_commands(demo_cluster):
    plan = dict(reboot_plan(jobs.get_kind("reboot").validate({})))
    assert plan["Boot id and uptime"] == "cat /proc/sys/kernel/random/boot_id; uptime"
    assert plan["Reboot"].startswith("systemctl reboot (as sudo -n -- systemctl reboot")
    assert "900 s at most" in plan["Up"] and "a changed key fails the node" in plan["Up"]
    assert plan["Check"].startswith("cat /proc/sys/kernel/random/boot_id (must differ from before); nvidia-smi -L")


def test_viewers_cannot_start_a_reboot_and_an_operators_start_is_audited(api_as, viewer, operator, demo_cluster):
    drained("gpu005")
    body = {"kind": "reboot", "targets": {"nodes": ["gpu005"]}, "parameters": {"poll_seconds": 1}, "transport": "sim"}
    assert api_as(viewer).post("/api/jobs/", body, format="json").status_code == 403
    assert not jobs.Job.objects.exists()
    bad = api_as(operator).post("/api/jobs/", body | {"parameters": {"up_timeout_seconds": 1}}, format="json")
    assert bad.status_code == 400 and "up_timeout_seconds" in bad.json()["parameters"]
    in_service = api_as(operator).post("/api/jobs/", body | {"targets": {"nodes": ["gpu006"]}}, format="json")
    assert in_service.status_code == 400 and "Not drained: gpu006" in in_service.json()["targets"][0]
    response = api_as(operator).post("/api/jobs/", body, format="json")
    assert response.status_code == 201
    job = jobs.Job.objects.get(public_id=response.json()["id"])
    assert job.parameters == FAST | {"poll_seconds": 1.0, "force": False} | {
        "down_timeout_seconds": 300,
        "up_timeout_seconds": 900,
    }
    entry = AuditEntry.objects.for_object(job).get(action="start")
    assert entry.actor == operator and entry.source == "api"


def test_the_node_page_shows_the_commands_and_only_operators_get_the_button(browser_as, viewer, demo_cluster):
    node = Node.objects.get(hostname="gpu001")
    page = browser_as(viewer).get(f"/nodes/{node.public_id}/").content.decode()
    assert "cat /proc/sys/kernel/random/boot_id; uptime" in page and "systemctl reboot" in page
    assert "Reboot gpu001</button>" not in page
    assert browser_as(viewer).post(f"/deployments/nodes/{node.public_id}/reboot/").status_code == 403
    assert not jobs.Job.objects.exists()


def test_an_operator_reboots_from_the_node_page_and_lands_on_the_job(
    browser_as, operator, demo_cluster, on_the_simulator
):
    node = Node.objects.get(hostname="gpu002")
    client = browser_as(operator)
    page = client.get(f"/nodes/{node.public_id}/").content.decode()
    assert "Reboot gpu002</button>" in page and "gpu002 is not drained" in page

    refused = client.post(f"/deployments/nodes/{node.public_id}/reboot/", follow=True)
    assert "gpu002 was not rebooted: targets: Not drained: gpu002" in refused.content.decode()
    assert not jobs.Job.objects.exists()

    response = client.post(f"/deployments/nodes/{node.public_id}/reboot/", {"force": "on"})
    job = jobs.Job.objects.get(kind="reboot")
    assert response.status_code == 302 and response.url == f"/jobs/{job.public_id}/"
    assert job.parameters["force"] is True and job.requested_by == operator and job.transport == "sim"
    assert AuditEntry.objects.for_object(job).get(action="start").source == "ui"
    page = client.get(f"/nodes/{node.public_id}/").content.decode()
    assert f"/jobs/{job.public_id}/" in page  # its last reboot, linked


def test_a_driver_change_reboots_the_node_between_its_fix_and_its_verify(
    demo_cluster, operator, quick_reboots, run_shards
):
    from apps.deployments import services as deployments
    from apps.jobs.models import Artifact

    node = Node.objects.get(hostname="gpu030")
    SimChange.objects.create(node=node, key="software:driver", value="570.172.08")  # the plan wants 580.159.04
    read = ["cat", "/proc/sys/kernel/random/boot_id"]
    before = simulator.run_command(node=node, argv=read).stdout.strip()
    no_wait = {check: {"cooldown_seconds": 0} for check in ("hbm_bandwidth", "nvlink_bandwidth", "nccl_busbw")}
    deployment = deployments.create_deployment(
        name="driver-bump",
        targets=jobs.TargetSpec(nodes=("gpu030",)),
        user=operator,
        criteria_edits=no_wait,
        transport="sim",
    )
    shown = deployments.disruptive_commands(deployment)["driver"]["gpu030"]
    assert shown[-3:-1] == ["cat /proc/sys/kernel/random/boot_id", "systemctl reboot"]  # approved with the fix
    deployments.approve(deployment=deployment, user=operator, steps=["driver"])
    run = deployments.start(deployment=deployment, user=operator)
    run_shards(run.job)

    cell = run.job.steps.get(hostname="gpu030", step="driver")
    transcript = Artifact.objects.get(step=cell, stream="stdout").text()
    assert cell.status == StepStatus.SUCCEEDED, (cell.summary, transcript)
    assert cell.summary == "applied 1 change, verified after a reboot"
    order = [transcript.index(text) for text in ("apt-get", "$ systemctl reboot", "# reboot, down: stopped answering")]
    assert order == sorted(order) and "# reboot, up: answering over SSH after" in transcript
    assert transcript.rindex("nvidia-smi") > transcript.index("# reboot, up:")  # verified after the reboot
    assert simulator.run_command(node=node, argv=read).stdout.strip() != before
    later = run.job.steps.filter(hostname="gpu030", position__gt=cell.position)
    assert later.exists() and not later.filter(status=StepStatus.ERROR).exists()  # over the new connection


def test_a_canceled_reboot_ends_at_once_while_it_waits_for_the_node(demo_cluster, settings, run_shards, operator):
    """The wait for the node to come back (30 s between tries, up to two hours) is cut short by the cancel."""
    settings.RACKPILOT_SIM_REBOOT_SECONDS = 3600  # away for an hour
    settings.RACKPILOT_JOB_CANCEL_POLL_SECONDS = 0.1
    drained("gpu001")
    job = start("gpu001", poll_seconds=30, up_timeout_seconds=7200)
    runner = threading.Thread(target=run_shards, args=(job,))
    runner.start()
    try:
        waiting = JobStep.objects.filter(job=job, step="up", status=StepStatus.RUNNING)
        deadline = time.monotonic() + 60
        while not waiting.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert waiting.exists(), [(c.step, c.status, c.summary) for c in job.steps.all()]
        time.sleep(0.5)  # into the 30 s wait between tries
        jobs.cancel_job(job=job, user=operator)
        runner.join(20)
        assert not runner.is_alive()  # cut short: the wait between tries alone is 30 s
    finally:
        runner.join(30)
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELED
    matrix = cells(job)
    assert matrix["gpu001", "up"].status == StepStatus.CANCELED
    assert matrix["gpu001", "check"].status == StepStatus.CANCELED
