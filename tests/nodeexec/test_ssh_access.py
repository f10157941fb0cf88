"""Access to a real cluster, over real OpenSSH sshds on the loopback: the login comes from the node's access profile
(user, encrypted key, jump host, sudo), the jump host's key is verified, root commands go through `sudo -n`, and the
private key never shows up in what a job records."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from apps.core.models import AuditEntry
from apps.inventory.choices import HostKeyState
from apps.inventory.hostkeys import fingerprint_of
from apps.inventory.models import SshAccess, SshHostKey
from apps.jobs import services
from apps.jobs.choices import JobStatus, StepStatus
from apps.jobs.kinds import KINDS, JobKind, StepSpec, register_kind
from apps.jobs.models import Artifact, JobEvent, JobStep
from tests import factories
from tests.inventory.factories import ed25519_key
from tests.nodeexec.conftest import require_sshd
from tests.nodeexec.sshd import Sshd, free_port
from tests.nodeexec.test_ssh import make_ssh_node, run

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SUDO = "/usr/bin/sudo"
DMESG = "/usr/bin/dmesg"


def require_sudo():
    if not (os.path.exists(SUDO) and os.path.exists(DMESG) and os.path.isdir("/etc/sudoers.d")):
        message = "needs sudo and dmesg (apt-get install sudo)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def start_sshd(*, user: str | None = None, listen=("127.0.0.1",), client_key_from: Sshd | None = None):
    require_sshd()
    # A jump host (client_key_from given) logs what it forwards, so a test can tell a tunnel from a direct login.
    log_level = "DEBUG1" if client_key_from is not None else "VERBOSE"
    server = Sshd(tempfile.mkdtemp(prefix="rackpilot-sshd-"), listen=listen, log_level=log_level)
    if user:
        server.user = user
    if client_key_from is not None:  # the same key pair logs in to the jump host and to the nodes behind it
        for name in ("userkey", "userkey.pub"):
            shutil.copy(client_key_from.root / name, server.root / name)
        (server.root / "authorized_keys").write_text((client_key_from.root / "userkey.pub").read_text())
    return server.start()


@pytest.fixture
def servers():
    started: list[Sshd] = []

    def start(**options) -> Sshd:
        server = start_sshd(**options)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)


@pytest.fixture
def sudoers():
    """Writes a sudoers rule for one test user (a file of its own under /etc/sudoers.d), removed afterwards."""
    require_sudo()
    written: list[Path] = []

    def write(user: str, rules: str) -> None:
        path = Path("/etc/sudoers.d") / f"rackpilot-test-{user}"
        candidate = path.with_name(f"{path.name}-new")
        candidate.write_text(rules)
        candidate.chmod(0o440)
        subprocess.run(["visudo", "-c", "-q", "-f", str(candidate)], check=True)
        candidate.rename(path)
        written.append(path)

    yield write
    for path in written:
        path.unlink(missing_ok=True)


@pytest.fixture
def root_check():
    """A kind with one plain command and one the catalogue marks root (dmesg: kernel.dmesg_restrict keeps it root's)."""
    import apps.deployments.commands  # noqa: F401  (registers dmesg)

    class RootCheck(JobKind):
        name = "test-root-check"

        def steps(self, parameters):
            return [
                StepSpec(name="uname", command="uname", stop_on_failure=False),
                StepSpec(name="dmesg", command="dmesg", stop_on_failure=False),
            ]

    register_kind(RootCheck)
    yield RootCheck.name
    KINDS.pop(RootCheck.name)


@pytest.fixture(autouse=True)
def worker_defaults(settings, monkeypatch):
    # The worker's own login must not work anywhere: whatever logs in, logs in through the access profile.
    settings.RACKPILOT_SSH_USER = "nobody-rackpilot"
    settings.RACKPILOT_SSH_KEY = ""
    settings.RACKPILOT_EVENT_FLUSH_MS = 50
    monkeypatch.setattr(services, "enqueue", lambda job: None)
    return settings


def start_job(kind, nodes):
    return services.create_job(
        kind=kind, targets=services.TargetSpec(nodes=tuple(n.hostname for n in nodes)), parameters={}, transport="ssh"
    )


def key_lines(private_key: str) -> list[str]:
    return [line for line in private_key.splitlines() if line and not line.startswith("-----")]


def assert_key_nowhere(job, private_key: str) -> None:
    lines = key_lines(private_key)
    assert lines
    recorded = [f"{e.message} {e.data}" for e in JobEvent.objects.filter(job=job)]
    recorded += [a.text() for a in Artifact.objects.filter(step__job=job)]
    recorded += [f"{c.summary}" for c in JobStep.objects.filter(job=job)]
    recorded += [str(a.changes) for a in AuditEntry.objects.all()]
    assert recorded
    for text in recorded:
        for line in lines:
            assert line not in text


def cell(job, hostname, step):
    return JobStep.objects.get(job=job, hostname=hostname, step=step)


def test_nodes_behind_a_jump_host_with_a_sudo_login_run_a_job_end_to_end(
    servers, sudoers, root_check, tmp_path, caplog
):
    caplog.set_level("DEBUG")
    user = "rp-sudo-ok"
    nodes_sshd = servers(user=user, listen=("127.0.0.1", "127.0.0.2"))
    jump = servers(listen=("127.0.0.5",), client_key_from=nodes_sshd)
    sudo_log = tmp_path / "sudo.log"
    sudo_log.touch()
    sudoers(user, f"Defaults:{user} logfile={sudo_log}\n{user} ALL=(root) NOPASSWD: {DMESG}\n")
    private_key = nodes_sshd.client_key.read_text()
    site = factories.make_site()
    nodes = [
        make_ssh_node(nodes_sshd, "behind1", address="127.0.0.1"),
        make_ssh_node(nodes_sshd, "behind2", address="127.0.0.2"),
    ]
    rack = factories.make_rack(site=site)
    for node in nodes:
        node.rack = rack
        node.save()
    access = SshAccess(
        site=site,
        user=user,
        sudo=True,
        jump_host="127.0.0.5",
        jump_port=jump.port,
        jump_user=jump.user,
        jump_host_keys=jump.host_key,
    )
    access.set_private_key(private_key)
    access.save()

    job = run(start_job(root_check, nodes))

    cells = JobStep.objects.filter(job=job)
    assert job.status == JobStatus.SUCCEEDED, [(c.hostname, c.step, c.summary) for c in cells]
    assert {c.status for c in cells} == {StepStatus.SUCCEEDED} and cells.count() == 4
    assert cell(job, "behind1", "dmesg").summary.startswith("[")  # the kernel log: sudo ran it as root
    # Two nodes, one shared connection to the jump host, which carried each node's one login.
    assert jump.accepted_logins() == 1
    assert nodes_sshd.accepted_logins() == 2
    assert jump.forwarded_to("127.0.0.1", nodes_sshd.port) == 1 and jump.forwarded_to("127.0.0.2", nodes_sshd.port) == 1
    # sudo ran dmesg (and only dmesg: uname needs no root) once per node.
    logged = sudo_log.read_text()
    assert logged.count(f"COMMAND={DMESG}") == 2 and "uname" not in logged
    assert_key_nowhere(job, private_key)
    assert caplog.text and not any(line in caplog.text for line in key_lines(private_key))

    # Without sudo the same login cannot read the kernel log: the wrapping is what made it work.
    if Path("/proc/sys/kernel/dmesg_restrict").read_text().strip() == "1":
        SshAccess.objects.filter(pk=access.pk).update(sudo=False)
        job = run(start_job(root_check, nodes))
        assert cell(job, "behind1", "uname").status == StepStatus.SUCCEEDED
        assert cell(job, "behind1", "dmesg").status == StepStatus.FAILED
        assert sudo_log.read_text().count(f"COMMAND={DMESG}") == 2


def test_a_jump_host_with_an_untrusted_key_fails_with_its_fingerprint_and_nothing_runs(servers, root_check):
    nodes_sshd = servers(listen=("127.0.0.1",))
    jump = servers(listen=("127.0.0.5",), client_key_from=nodes_sshd)
    node = make_ssh_node(nodes_sshd, "hidden", address="127.0.0.1")
    access = SshAccess(
        node=node,
        user=nodes_sshd.user,
        jump_host="127.0.0.5",
        jump_port=jump.port,
        jump_host_keys=ed25519_key(9),  # not the jump host's key
    )
    access.set_private_key(nodes_sshd.client_key.read_text())
    access.save()

    job = run(start_job(root_check, [node]))

    first = cell(job, "hidden", "uname")
    assert first.status == StepStatus.ERROR
    assert f"jump host 127.0.0.5:{jump.port}" in first.summary and fingerprint_of(jump.host_key) in first.summary
    assert cell(job, "hidden", "dmesg").status == StepStatus.SKIPPED
    assert job.status == JobStatus.FAILED
    assert jump.accepted_logins() == 0 and nodes_sshd.accepted_logins() == 0
    # The jump host's key is not offered as the node's own key for approval.
    assert list(SshHostKey.objects.filter(node=node).values_list("state", flat=True)) == [HostKeyState.TRUSTED]


def test_an_unreachable_jump_host_is_named(servers, root_check):
    nodes_sshd = servers(listen=("127.0.0.1",))
    node = make_ssh_node(nodes_sshd, "stranded", address="127.0.0.1")
    port = free_port()
    SshAccess.objects.create(
        node=node, user=nodes_sshd.user, jump_host="127.0.0.5", jump_port=port, jump_host_keys=ed25519_key(4)
    )
    job = run(start_job(root_check, [node]))
    summary = cell(job, "stranded", "uname").summary
    assert summary.startswith(f"ssh to jump host 127.0.0.5:{port} failed"), summary
    assert nodes_sshd.accepted_logins() == 0


def test_a_sudo_that_wants_a_password_fails_the_cell_with_what_to_do(servers, sudoers, root_check):
    user = "rp-sudo-pw"
    nodes_sshd = servers(user=user, listen=("127.0.0.3",))
    sudoers(user, f"{user} ALL=(root) {DMESG}\n")  # no NOPASSWD
    node = make_ssh_node(nodes_sshd, "asks", address="127.0.0.3")
    access = SshAccess(node=node, user=user, sudo=True)
    access.set_private_key(nodes_sshd.client_key.read_text())
    access.save()

    job = run(start_job(root_check, [node]))

    assert cell(job, "asks", "uname").status == StepStatus.SUCCEEDED
    dmesg = cell(job, "asks", "dmesg")
    assert dmesg.status == StepStatus.FAILED and dmesg.exit_code == 1
    assert dmesg.summary == (
        f"sudo needs a password for {user} on asks: allow these commands without a password (NOPASSWD) "
        "or log in as root"
    )
    assert job.status == JobStatus.FAILED


def test_each_node_gets_its_most_specific_login_and_the_rest_the_workers(root_check):
    from apps.jobs.targets import node_targets

    site = factories.make_site()
    rack = factories.make_rack(site=site)
    by_site, by_rack, by_node, default = (
        factories.make_node(rack=factories.make_rack(site=site), management_ip="127.0.1.1", ssh_port=22),
        factories.make_node(rack=rack, management_ip="127.0.1.2", ssh_port=2200),
        factories.make_node(rack=rack, management_ip="127.0.1.3", ssh_port=2200),
        factories.make_node(management_ip="127.0.1.4", ssh_port=2201),
    )
    SshAccess.objects.create(site=site, user="siteops", jump_host="bastion", jump_host_keys=ed25519_key(5))
    SshAccess.objects.create(rack=rack, user="rackops", sudo=True)
    SshAccess.objects.create(node=by_node, user="nodeops", port=2222)
    job = start_job(root_check, [by_site, by_rack, by_node, default])
    targets = {t.hostname: t for shard in job.shards.all() for t in node_targets(job, shard)}
    site_login = targets[by_site.hostname].login
    assert site_login.username == "siteops" and site_login.jump.host == "bastion"
    assert site_login.jump.trusted_keys == (ed25519_key(5),)
    assert targets[by_rack.hostname].login.username == "rackops" and targets[by_rack.hostname].login.uses_sudo
    assert targets[by_rack.hostname].port == 2200  # no port in the profile: the node's own
    assert targets[by_node.hostname].login.username == "nodeops" and targets[by_node.hostname].port == 2222
    assert targets[default.hostname].login is None and targets[default.hostname].port == 2201
