"""The multi-node NCCL suite over the ssh transport, against OpenSSH's sshd on 127.0.0.1 (host keys verified): the
launcher's hostfile is written there by the catalogue script, then `mpirun --hostfile … -np N -N 8 -x NCCL_… --bind-to
numa all_reduce_perf …` runs on it.

This host has no GPUs and no Open MPI, so the test user's sessions find a test double of the *tool* first on their
PATH (sshd's `SetEnv` for this sshd only): an executable `mpirun` that checks its arguments, keeps them and the
hostfile it was given, and prints a real two-node nccl-tests capture with --tag-output's prefixes. ssh, the remote
shell, the script and the quoting are all real; only mpirun and the GPUs behind it are not.
"""

import shutil
import tempfile
from pathlib import Path

import pytest
from rest_framework import serializers

from apps.benchmarks import judging, services
from apps.benchmarks.choices import RunStatus
from apps.benchmarks.models import BenchmarkRun, BenchmarkTest
from apps.inventory.choices import HostKeyState, NicPurpose
from apps.inventory.hostkeys import fingerprint_of
from apps.inventory.models import SshHostKey
from apps.jobs.models import Job, JobEvent
from apps.parsers.nccl_tests import parse_nccl_tests
from tests import factories
from tests.nodeexec.conftest import require_sshd
from tests.nodeexec.sshd import Sshd, keygen
from tests.nodeexec.test_ssh import make_ssh_node
from tests.parsers.helpers import REAL

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CAPTURE = REAL / "nccl-tests/all_reduce_perf-a100-oci-bm-gpu4.8-2node-16gpu-roce-10G.txt"
SIZE = 10 * 2**30  # the capture's one size (-b 10G -e 10G)

# The double: refuses anything but `--hostfile FILE` first, keeps its argv (one per line) and the hostfile, prints
# the capture as Open MPI's --tag-output prints rank 0's lines.
MPIRUN_DOUBLE = """#!/bin/sh
if [ "$1" != --hostfile ] || [ ! -f "$2" ]; then echo "mpirun double: expected --hostfile FILE first" >&2; exit 2; fi
cp "$2" "{records}/hostfile"
for arg in "$@"; do printf '%s\\n' "$arg"; done > "{records}/argv"
sed 's/^/[1,0]<stdout>:/' "{capture}"
"""


@pytest.fixture
def mpi_sshd():
    require_sshd()
    root = Path(tempfile.mkdtemp(prefix="rackpilot-sshd-"))
    tools, records = root / "bin", root / "records"
    tools.mkdir(mode=0o755)
    records.mkdir()
    records.chmod(0o1777)  # the test user writes what the double saw
    (tools / "mpirun").write_text(MPIRUN_DOUBLE.format(records=records, capture=CAPTURE))
    (tools / "mpirun").chmod(0o755)
    server = Sshd(root, extra_config=(f"SetEnv PATH={tools}:/usr/local/bin:/usr/bin:/bin",)).start()
    server.records = records
    yield server
    server.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def ssh_worker(settings, mpi_sshd):
    settings.RACKPILOT_SSH_USER = mpi_sshd.user
    settings.RACKPILOT_SSH_KEY = str(mpi_sshd.client_key)
    return settings


def gpu_node(sshd, hostname, address, *, trust=True):
    node = make_ssh_node(sshd, hostname, address=address, trust=trust)
    node.gpu_sku = factories.h200()
    node.save(update_fields=["gpu_sku"])
    for index in range(8):
        factories.make_gpu(node=node, sku=node.gpu_sku, index=index)
    factories.make_nic(node=node, name="eno1", purpose=NicPurpose.MANAGEMENT, rdma_capable=False, speed_gbps=25)
    return node


def test_the_multi_node_suite_runs_mpirun_from_a_hostfile_on_the_launcher_over_ssh(mpi_sshd, ssh_worker):
    launcher = gpu_node(mpi_sshd, "gpu-ssh-a", "127.0.0.1")
    other = gpu_node(mpi_sshd, "gpu-ssh-b", "127.0.0.2")

    run = services.start_run(
        suite="nccl",
        targets=services.parse_nodes(f"{launcher.hostname},{other.hostname}"),
        min_bytes=SIZE,
        max_bytes=SIZE,
        transport="ssh",
        cooldown_seconds=0,
        queue=False,
    )
    run = services.execute_run(run=run)

    expected = [
        "--hostfile",
        "-",  # the temporary file's name, compared apart
        "--allow-run-as-root",
        "--tag-output",
        "-np",
        "16",
        "-N",
        "8",
        "-x",
        "NCCL_SOCKET_IFNAME=eno1",
        "-x",
        "NCCL_IB_HCA=mlx5",
        "-x",
        "NCCL_IB_GID_INDEX=3",
        "--bind-to",
        "numa",
        "all_reduce_perf",
        "-b",
        str(SIZE),
        "-e",
        str(SIZE),
        "-f",
        "2",
        "-n",
        "20",
        "-g",
        "1",
    ]
    argv = (mpi_sshd.records / "argv").read_text().splitlines()
    assert argv[1].startswith("/tmp/tmp.")  # mktemp's file on the launcher, removed after the run
    assert [argv[0], "-", *argv[2:]] == expected
    assert not Path(argv[1]).exists()
    assert (mpi_sshd.records / "hostfile").read_text() == "gpu-ssh-a slots=8\ngpu-ssh-b slots=8\n"

    test = BenchmarkTest.objects.get(run=run)
    assert test.hosts == [launcher.hostname, other.hostname]
    parsed = parse_nccl_tests(CAPTURE.read_text())
    assert test.series == judging.series(parsed) and [row["size_bytes"] for row in test.series] == [SIZE]
    assert test.busbw_gb_per_s == 191.76  # out-of-place busbw of the capture's row
    assert run.status == RunStatus.SUCCEEDED, run.summary
    job = run.rounds.get().job
    command = JobEvent.objects.get(job=job, message__startswith="$ sh -c ").message
    assert 'mpirun --hostfile "$hostfile" "$@"' in command
    assert command.endswith(
        "rackpilot-mpirun gpu-ssh-a:8,gpu-ssh-b:8 --allow-run-as-root --tag-output -np 16 -N 8 "
        "-x NCCL_SOCKET_IFNAME=eno1 -x NCCL_IB_HCA=mlx5 -x NCCL_IB_GID_INDEX=3 --bind-to numa "
        f"all_reduce_perf -b {SIZE} -e {SIZE} -f 2 -n 20 -g 1"
    )


def test_a_node_without_a_trusted_host_key_is_refused_before_anything_runs(mpi_sshd, ssh_worker):
    launcher = gpu_node(mpi_sshd, "gpu-ssh-c", "127.0.0.1")
    stranger = gpu_node(mpi_sshd, "gpu-ssh-d", "127.0.0.2", trust=False)

    with pytest.raises(serializers.ValidationError) as caught:
        services.start_run(
            suite="nccl",
            targets=services.parse_nodes(f"{launcher.hostname},{stranger.hostname}"),
            transport="ssh",
            queue=False,
        )

    assert "No trusted SSH host key for gpu-ssh-d" in str(caught.value.detail["nodes"])
    assert not BenchmarkRun.objects.exists() and not Job.objects.exists()
    assert not (mpi_sshd.records / "argv").exists()


def test_a_launcher_whose_host_key_changed_is_not_run_on(mpi_sshd, ssh_worker):
    launcher = gpu_node(mpi_sshd, "gpu-ssh-e", "127.0.0.1", trust=False)
    other = gpu_node(mpi_sshd, "gpu-ssh-f", "127.0.0.2")
    impostor = keygen(Path(mpi_sshd.root) / "other-host-key")
    SshHostKey.objects.create(
        node=launcher, public_key=impostor, fingerprint=fingerprint_of(impostor), state=HostKeyState.TRUSTED
    )

    run = services.start_run(
        suite="nccl",
        targets=services.parse_nodes(f"{launcher.hostname},{other.hostname}"),
        min_bytes=SIZE,
        max_bytes=SIZE,
        transport="ssh",
        cooldown_seconds=0,
        queue=False,
    )
    run = services.execute_run(run=run)

    test = BenchmarkTest.objects.get(run=run)
    assert test.verdict == "could_not_run" and run.status == RunStatus.FAILED
    cell = run.rounds.get().job.steps.get()
    assert cell.summary.startswith("could not run: HOST KEY CHANGED"), cell.summary
    assert not (mpi_sshd.records / "argv").exists()  # nothing ran on the launcher
