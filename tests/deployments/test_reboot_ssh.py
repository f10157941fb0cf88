"""The reboot kind over ssh against a real sshd on 127.0.0.1. This host cannot reboot, so the test's reboot command
only leaves a note, and a thread plays the reboot: it stops sshd, gives the "node" a new boot id and starts sshd again
on the same port, with the same host key, or with a new one (a reinstalled node, or an impostor)."""

import threading
import time
import uuid
from pathlib import Path

import pytest

from apps.deployments.kinds.reboot import BOOT_ID, REBOOT
from apps.inventory import services as inventory
from apps.inventory.choices import HostKeyState
from apps.inventory.models import SshHostKey
from apps.jobs import services as jobs
from apps.jobs.choices import JobStatus, StepStatus
from apps.nodeexec.catalogue import CATALOGUE, Command
from tests.nodeexec.conftest import sshd  # noqa: F401  (the fixture)
from tests.nodeexec.sshd import keygen
from tests.nodeexec.test_ssh import make_ssh_node, ssh_settings  # noqa: F401
from tests.waits import HANG_S

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
UP_TIMEOUT = 600  # a node back with a new host key is refused at once: far longer than the test may take loaded


@pytest.fixture
def rebootable(sshd, monkeypatch):  # noqa: F811
    """The node's boot id is a file the "reboot" rewrites; the reboot command writes a note the thread waits for."""
    root = Path(sshd.root)
    (root / "boot_id").write_text(f"{uuid.uuid4()}\n")
    (root / "boot_id").chmod(0o644)
    note = Path(f"/tmp/rackpilot-reboot-note-{uuid.uuid4().hex}")  # the test user may write there, not in root
    monkeypatch.setitem(CATALOGUE, BOOT_ID, Command(BOOT_ID, ("cat", str(root / "boot_id")), "test boot id"))
    command = Command(REBOOT, ("sh", "-c", 'echo reboot > "$0"', str(note)), "test reboot")
    monkeypatch.setitem(CATALOGUE, REBOOT, command)
    yield root, note
    note.unlink(missing_ok=True)


def play_the_reboot(sshd, root: Path, note: Path, *, new_key: bool, away: float = 1.5) -> threading.Thread:  # noqa: F811
    note.unlink(missing_ok=True)

    def reboot():
        deadline = time.monotonic() + HANG_S  # the job reached its reboot step: a bound on a hang
        while not note.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        sshd.stop()
        time.sleep(away)
        (root / "boot_id").write_text(f"{uuid.uuid4()}\n")
        if new_key:
            sshd.host_key = keygen(sshd.host_key_path)
        sshd.start()

    thread = threading.Thread(target=reboot, daemon=True)
    thread.start()
    return thread


def start(node, operator, *, up_timeout_seconds: float = 20):
    inventory.drain_nodes(nodes=[node], reason="driver change")
    return jobs.create_job(
        kind="reboot",
        targets=jobs.TargetSpec(nodes=(node.hostname,)),
        parameters={"poll_seconds": 0.2, "down_timeout_seconds": 20, "up_timeout_seconds": up_timeout_seconds},
        transport="ssh",
        requested_by=operator,
        queue=False,
    )


def test_the_node_goes_away_and_comes_back_with_its_host_key(sshd, ssh_settings, rebootable, operator, run_shards):  # noqa: F811
    root, note = rebootable
    node = make_ssh_node(sshd, "ssh-reboot-1")
    before = (root / "boot_id").read_text().strip()
    thread = play_the_reboot(sshd, root, note, new_key=False)
    job = run_shards(start(node, operator))
    thread.join(10)

    cells = {cell.step: cell for cell in job.steps.all()}
    assert job.status == JobStatus.SUCCEEDED, {step: cell.summary for step, cell in cells.items()}
    assert cells["down"].summary.startswith("stopped answering after") and "failed" in cells["down"].summary
    assert cells["up"].summary.startswith("answering over SSH after")
    after = (root / "boot_id").read_text().strip()
    assert cells["check"].summary == f"rebooted: boot id {before} → {after}"  # a node with no GPUs expected
    assert list(SshHostKey.objects.filter(node=node).values_list("state", flat=True)) == [HostKeyState.TRUSTED]


def test_a_node_back_with_a_new_host_key_fails_and_the_key_is_not_trusted(
    sshd,  # noqa: F811
    ssh_settings,  # noqa: F811
    rebootable,
    operator,
    run_shards,
):
    root, note = rebootable
    node = make_ssh_node(sshd, "ssh-reboot-2")
    old = sshd.host_key
    thread = play_the_reboot(sshd, root, note, new_key=True)
    started = time.monotonic()
    job = run_shards(start(node, operator, up_timeout_seconds=UP_TIMEOUT))
    thread.join(10)

    cells = {cell.step: cell for cell in job.steps.all()}
    assert job.status == JobStatus.FAILED
    assert cells["up"].status == StepStatus.ERROR
    assert cells["up"].summary.startswith("HOST KEY CHANGED: ssh-reboot-2 presented SHA256:")
    assert cells["check"].status == StepStatus.SKIPPED
    assert time.monotonic() - started < UP_TIMEOUT / 2  # refused at the first answer, not retried until the timeout
    trusted = SshHostKey.objects.filter(node=node, state=HostKeyState.TRUSTED)
    assert list(trusted.values_list("public_key", flat=True)) == [old]
    assert SshHostKey.objects.get(node=node, state=HostKeyState.PENDING).public_key == sshd.host_key  # for a person
