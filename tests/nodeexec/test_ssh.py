"""The ssh transport against a real OpenSSH sshd on 127.0.0.1: jobs run, host keys are enforced, cancel kills."""

import os
import threading
import time
from pathlib import Path

import pytest

from apps.inventory.choices import HostKeyState
from apps.inventory.hostkeys import fingerprint_of
from apps.inventory.models import SshHostKey
from apps.jobs import executor, services
from apps.jobs.choices import JobStatus, StepStatus
from apps.jobs.models import Job, JobEvent, JobStep
from apps.jobs.targets import node_targets
from tests import factories
from tests.nodeexec.sshd import keygen
from tests.waits import HANG_S

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def ssh_settings(settings, sshd):
    settings.RACKPILOT_SSH_USER = sshd.user
    settings.RACKPILOT_SSH_KEY = str(sshd.client_key)
    settings.RACKPILOT_EVENT_FLUSH_MS = 50
    settings.RACKPILOT_JOB_CANCEL_POLL_SECONDS = 0.1
    settings.RACKPILOT_JOB_KILL_GRACE_SECONDS = 1
    return settings


@pytest.fixture(autouse=True)
def no_celery(monkeypatch):
    monkeypatch.setattr(services, "enqueue", lambda job: None)


def make_ssh_node(sshd, hostname, *, trust=True, address="127.0.0.1"):
    node = factories.make_node(hostname=hostname, management_ip=address, ssh_port=sshd.port)
    if trust:
        SshHostKey.objects.create(
            node=node, public_key=sshd.host_key, fingerprint=fingerprint_of(sshd.host_key), state=HostKeyState.TRUSTED
        )
    return node


def run(job):
    for shard in job.shards.all():
        executor.run_shard(job_public_id=str(job.public_id), index=shard.index, worker="pytest")
    job.refresh_from_db()
    return job


def start(kind, nodes, **parameters):
    return services.create_job(
        kind=kind,
        targets=services.TargetSpec(nodes=tuple(n.hostname for n in nodes)),
        parameters=parameters,
        transport="ssh",
    )


def test_a_job_runs_over_ssh_with_one_connection_per_node(sshd, ssh_settings):
    nodes = [make_ssh_node(sshd, "ssh1", address="127.0.0.1"), make_ssh_node(sshd, "ssh2", address="127.0.0.2")]
    job = run(start("shell-check", nodes, commands=["uname", "hostname", "true"], interface="lo"))
    cells = JobStep.objects.filter(job=job)
    assert job.status == JobStatus.SUCCEEDED, [(c.hostname, c.step, c.summary) for c in cells]
    assert {c.status for c in cells} == {StepStatus.SUCCEEDED} and cells.count() == 8
    assert cells.get(hostname="ssh1", step="uname").summary.startswith(os.uname().sysname)
    lo = JobEvent.objects.filter(job=job, hostname="ssh2", step="ip-link-show", level="output").first()
    assert '"ifname":"lo"' in lo.message
    # The marker line that carries the remote process group never shows up as output.
    assert not JobEvent.objects.filter(job=job, message__contains="rackpilot-pgid").exists()
    assert sshd.accepted_logins() == 2  # four steps per node, one connection per node


def test_an_unknown_host_key_is_refused_and_offered_for_approval(sshd, ssh_settings):
    node = make_ssh_node(sshd, "fresh", trust=False)
    job = run(start("shell-check", [node], commands=["uname", "hostname"]))
    first = JobStep.objects.get(job=job, step="uname")
    fingerprint = fingerprint_of(sshd.host_key)
    assert first.status == StepStatus.ERROR and first.summary.startswith(f"unknown host key {fingerprint}")
    assert JobStep.objects.get(job=job, step="hostname").status == StepStatus.SKIPPED
    assert job.status == JobStatus.FAILED
    pending = SshHostKey.objects.get(node=node)
    assert pending.state == HostKeyState.PENDING and pending.fingerprint == fingerprint
    assert pending.public_key == sshd.host_key
    assert sshd.accepted_logins() == 0
    # Once an operator trusts it, the same job goes through.
    SshHostKey.objects.filter(pk=pending.pk).update(state=HostKeyState.TRUSTED)
    assert run(start("shell-check", [node], commands=["uname"])).status == JobStatus.SUCCEEDED


def test_a_changed_host_key_fails_loudly_and_nothing_is_trusted(sshd, ssh_settings):
    node = make_ssh_node(sshd, "swapped")
    old = sshd.host_key
    new = sshd.new_host_key()
    job = run(start("shell-check", [node], commands=["uname"]))
    cell = JobStep.objects.get(job=job)
    assert cell.status == StepStatus.ERROR
    assert cell.summary.startswith("HOST KEY CHANGED") and fingerprint_of(new) in cell.summary
    trusted = SshHostKey.objects.filter(node=node, state=HostKeyState.TRUSTED)
    assert list(trusted.values_list("public_key", flat=True)) == [old]
    assert SshHostKey.objects.get(node=node, state=HostKeyState.PENDING).public_key == new
    assert sshd.accepted_logins() == 0


def test_a_revoked_key_is_refused(sshd, ssh_settings, tmp_path):
    node = make_ssh_node(sshd, "revoked", trust=False)
    SshHostKey.objects.create(
        node=node, public_key=sshd.host_key, fingerprint=fingerprint_of(sshd.host_key), state=HostKeyState.REVOKED
    )
    SshHostKey.objects.create(
        node=node, public_key=keygen(tmp_path / "other"), fingerprint="SHA256:other", state=HostKeyState.TRUSTED
    )
    job = run(start("shell-check", [node], commands=["uname"]))
    assert JobStep.objects.get(job=job).status == StepStatus.ERROR
    assert sshd.accepted_logins() == 0


def _remote_sleeps(user):
    import pwd

    uid = pwd.getpwnam(user).pw_uid
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline[:2] == [b"sleep", b"471"]:
            found.append(int(pid))
    return found


def test_cancel_kills_the_remote_process_group(sshd, ssh_settings, operator):
    nodes = [make_ssh_node(sshd, f"c{i}", address=f"127.0.0.{i + 1}") for i in range(3)]
    job = start("sleep", nodes, seconds=471, steps=2)
    runner = threading.Thread(target=run, args=(job,))
    runner.start()
    try:
        deadline = time.monotonic() + HANG_S  # the three sleeps started over ssh: a bound on a hang
        while len(_remote_sleeps(sshd.user)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_remote_sleeps(sshd.user)) == 3
        services.cancel_job(job=job, user=operator)
        # A wait for the kill, not a timing (a loaded machine takes longer; the sleep's own 471 s is far off).
        deadline = time.monotonic() + 60
        while _remote_sleeps(sshd.user) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _remote_sleeps(sshd.user), "remote sleep still running a minute after cancel"
    finally:
        runner.join(30)
    job = Job.objects.get(pk=job.pk)
    assert job.status == JobStatus.CANCELED
    assert set(JobStep.objects.filter(job=job).values_list("status", flat=True)) == {StepStatus.CANCELED}


def test_api_input_cannot_reach_the_remote_shell_unquoted(sshd, ssh_settings, tmp_path):
    """Quoting holds over SSH too: hostile argv elements arrive as literal words."""
    import asyncio

    from apps.nodeexec.base import NodeTarget, OutputCollector
    from apps.nodeexec.ssh import SshTransport

    marker = f"/tmp/rackpilot-pwned-{os.getpid()}"
    hostile = [f"$(touch {marker})", f"`touch {marker}`", f"; touch {marker}", "a'b\"c"]

    async def go():
        transport = SshTransport(username=sshd.user, client_keys=[str(sshd.client_key)])
        session = await transport.open(
            NodeTarget(hostname="q", address="127.0.0.1", port=sshd.port, trusted_keys=(sshd.host_key,))
        )
        lines = []
        collector = OutputCollector(cap=4096, on_line=lambda stream, line: lines.append(line))
        result = await session.run(
            ["printf", "%s\\n", *hostile], timeout=10, collector=collector, cancel=asyncio.Event(), grace=1
        )
        await session.close()
        return result, lines

    result, lines = asyncio.run(go())
    assert result.exit_code == 0 and lines == hostile
    assert not os.path.exists(marker)


def test_the_reaper_ends_over_ssh_what_a_lost_worker_left_running(sshd, ssh_settings):
    """A worker dies mid-command (its connection drops, no hangup reaches the remote `sleep`, which runs on): the
    reaper fails the shard and then ends the command on the node by its RACKPILOT_JOB marker, over ssh."""
    import asyncio
    from datetime import timedelta

    from django.utils import timezone

    from apps.jobs.models import JobShard
    from apps.jobs.orphans import command_marker
    from apps.nodeexec.base import OutputCollector
    from apps.nodeexec.local import marked_groups
    from apps.nodeexec.transports import get_transport

    ssh_settings.RACKPILOT_JOB_WORKER_LOSS_RERUNS = 0  # ended, not re-queued (sleep may run twice)
    node = make_ssh_node(sshd, "orphan1")
    job = start("sleep", [node], seconds=300)
    shard = job.shards.get()
    services.claim_shard(job=job, index=0, worker="doomed:1")
    marker = command_marker(job, shard)
    target = node_targets(job, shard)[0]

    async def lose_the_worker():
        session = await get_transport("ssh", marker=marker).open(target)
        collector = OutputCollector(cap=1024)
        command = asyncio.ensure_future(
            session.run(["sleep", "300"], timeout=600, collector=collector, cancel=asyncio.Event(), grace=1)
        )
        for _ in range(100):
            if marked_groups(marker):  # the sshd runs on this host: its sessions' processes are visible here
                break
            await asyncio.sleep(0.1)
        session.connection.abort()  # as when the worker process is killed: the TCP connection just goes
        command.cancel()

    asyncio.run(lose_the_worker())
    time.sleep(1)
    assert marked_groups(marker), "the remote sleep should outlive its dropped connection"
    JobShard.objects.filter(pk=shard.pk).update(heartbeat=timezone.now() - timedelta(hours=1))
    assert services.reap_stale_jobs() == 1
    deadline = time.monotonic() + 60  # the kill is at once; a loaded machine may take a while to show it
    while marked_groups(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not marked_groups(marker)
    job.refresh_from_db()
    assert job.status == JobStatus.ERROR and job.summary == "worker lost"
    assert JobEvent.objects.filter(job=job, message="ended what shard 0 left running on 1 of 1 node").exists()
