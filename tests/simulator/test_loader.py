"""The simulated node's storage / data-loader answers (findmnt, /proc/pressure/io, ps, the kernel's storage lines)
in the formats the real tools print, moved by the storage_slow fault; and the scheduler controller's sbatch."""

from pathlib import Path

import pytest

from apps.inventory.models import Node
from apps.parsers.storage import parse_findmnt, parse_ps, parse_psi, parse_storage_stalls
from apps.simulator import services as sim

REAL = Path(__file__).resolve().parents[1] / "parsers" / "data"


def _run(hostname: str, *argv: str):
    return sim.run_command(node=Node.objects.get(hostname=hostname), argv=list(argv))


@pytest.mark.django_db
def test_a_healthy_node_answers_in_the_real_formats(demo_cluster):
    psi = _run("gpu001", "cat", "/proc/pressure/io")
    assert psi.exit_code == 0 and parse_psi(psi.stdout).full.avg60 < 1.0
    ps = _run("gpu001", "ps", "-eo", "pid,ppid,stat,comm,args")
    real_header = (REAL / "ps-eo-kernel-threads-real.txt").read_text().splitlines()[0].split()
    assert ps.stdout.splitlines()[0].split() == real_header
    assert parse_ps(ps.stdout).processes[0].comm == "systemd"
    mounts = parse_findmnt(_run("gpu001", "findmnt", "-J", "--list", "-o", "TARGET,SOURCE,FSTYPE,OPTIONS").stdout)
    nfs = mounts.holding("/checkpoints/llm-pretrain")
    assert (nfs.fstype, nfs.server, nfs.option("hard")) == ("nfs4", "ckpt-gw", "")
    assert mounts.holding("/shared/data").fstype == "lustre"
    assert parse_storage_stalls(_run("gpu001", "dmesg").stdout).stalls == []


@pytest.mark.django_db
@pytest.mark.parametrize(("mount", "server"), [("/checkpoints", "ckpt-gw"), ("/shared", "10.30.0.10@o2ib")])
def test_a_stalled_mount_moves_pressure_and_the_kernel_log(demo_cluster, mount, server):
    sim.inject_fault(node=Node.objects.get(hostname="gpu002"), kind="storage_slow", target=mount, parameters={})
    assert parse_psi(_run("gpu002", "cat", "/proc/pressure/io").stdout).full.avg60 > 50
    stalls = parse_storage_stalls(_run("gpu002", "dmesg").stdout)
    assert stalls.servers == [server]
    assert parse_psi(_run("gpu001", "cat", "/proc/pressure/io").stdout).full.avg60 < 1.0  # only that node


@pytest.mark.django_db
def test_sbatch_numbers_each_submission_and_refuses_what_slurm_refuses(demo_cluster):
    argv = ("sbatch", "--job-name", "llm", "--nodes", "2", "--nodelist", "gpu001,gpu002", "--ntasks-per-node", "1")
    argv += ("--gpus-per-node", "8", "/workspace/train.sbatch", "--load", "/checkpoints/llm", "--ckpt-step", "400")
    assert _run("mgmt01", *argv).stdout == "Submitted batch job 4211\n"
    assert _run("mgmt01", *argv).stdout == "Submitted batch job 4212\n"
    excluded = argv[:9] + ("--exclude", "gpu002") + argv[9:]
    refused = _run("mgmt01", *excluded)
    assert refused.exit_code == 1 and "Requested node configuration is not available" in refused.stderr
    unknown = _run("mgmt01", *[value.replace("gpu002", "gpu999") for value in argv])
    assert unknown.exit_code == 1 and "Requested node configuration is not available" in unknown.stderr
