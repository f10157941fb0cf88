"""The adapter behind the jobs engine's `sim` transport."""

import asyncio
import math

import pytest

from apps.inventory.models import Node
from apps.jobs import services as jobs
from apps.jobs.choices import JobStatus
from apps.jobs.models import JobStep
from apps.nodeexec.base import NodeTarget, OutputCollector
from apps.nodeexec.sim import SimTransport, get_simulator
from apps.simulator.backend import SimulatorBackend


def test_the_app_registers_its_backend():
    assert isinstance(get_simulator(), SimulatorBackend)


def test_run_answers_for_a_node_target(gpu_node):
    target = NodeTarget(hostname="gpu001", address="10.10.0.1", node_id=gpu_node.pk)
    assert SimulatorBackend().run(target, ["hostname"]) == (0, "gpu001\n", "", 0.0)  # (exit, stdout, stderr, seconds)
    code, out, err, _ = SimulatorBackend().run(gpu_node, ["uname", "-a"])
    assert code == 0 and out.startswith("Linux gpu001 6.8.0-60-generic")


def test_unknown_commands_and_nodes_fail_like_a_shell(gpu_node):
    assert SimulatorBackend().run(gpu_node, ["frobnicate", "--now"]) == (
        127,
        "",
        "bash: frobnicate: command not found\n",
        0.0,
    )
    code, _, err, _ = SimulatorBackend().run(NodeTarget(hostname="ghost", address="10.0.0.9"), ["true"])
    assert code == 255 and "Could not resolve hostname ghost" in err


def test_wrappers_are_transparent(gpu_node):
    assert SimulatorBackend().run(gpu_node, ["sudo", "timeout", "30", "nvidia-smi", "-L"])[1].count("GPU ") == 8


@pytest.mark.django_db(transaction=True)
def test_the_sim_transport_runs_catalogue_commands_through_the_simulator():
    from apps.inventory.demo import ClusterShape, load_cluster
    from apps.nodeexec.catalogue import build

    load_cluster(ClusterShape(compute_nodes=1, nodes_per_rack=1, spines_per_plane=1, management_nodes=0))
    node = Node.objects.get(hostname="gpu001")
    target = NodeTarget(hostname=node.hostname, address=str(node.management_ip), node_id=node.pk)

    async def go():
        session = await SimTransport().open(target)
        collector = OutputCollector(cap=1 << 20)
        result = await session.run(
            build("nvidia-smi-query"), timeout=30, collector=collector, cancel=asyncio.Event(), grace=1
        )
        await session.close()
        return result

    result = asyncio.run(go())
    assert result.exit_code == 0
    assert result.stdout.decode().count("NVIDIA H200") == 8


def test_every_catalogue_command_is_answered(gpu_node, settings):
    from apps.nodeexec.catalogue import CATALOGUE

    settings.RACKPILOT_SIM_REBOOT_SECONDS = 0  # `systemctl reboot` is among them: the node is back at once

    examples = {
        "interface": "ens1np0",
        "interfaces": "ens1np0,ens2np0",
        "seconds": "0",
        "gpu_index": "0",
        "path": "/checkpoints",
        "checkpoint_path": "/checkpoints/llm-pretrain",  # what recovery reads (under RACKPILOT_CHECKPOINT_DIRS)
        "log_file": "/var/log/train/llm-pretrain.log",
        "number": "8",
        "pfc_mask": "0,0,0,1,0,0,0,0",
        "package": "libnccl2",
        "requirement": "torch==2.7.1",
        "base64": "TkNDTF9ERUJVRz1XQVJOCg==",
        # The scheduler drain commands (apps/deployments/node_operations.py).
        # The per-node suites (apps/benchmarks/kinds.py).
        "gpu_affinity": "0:1",
        "hpl_n": "20000",
        "hpl_nb": "1024",
        "hpl_p": "4",
        "hpl_q": "4",
        "nvbandwidth_cases": "device_local_copy",
        "interval_ms": "1000",
        "dcgm_level": "3",
        "scheduler_node": "gpu002",
        "slurm_node": "NodeName=gpu002",
        "slurm_reason": "Reason=fan swap (ticket 42)",
        "slurm_reboot_reason": "reason=firmware 2.1",
        "k8s_quarantine_taint": "rackpilot.io/quarantine=xid79:NoSchedule",
        # The benchmarks' nccl-tests and mpirun commands (apps/benchmarks/kinds.py), when that app is installed.
        "nccl_binary": "all_reduce_perf",
        "nccl_bytes": "8",
        "nccl_max_bytes": "1048576",
        "nccl_step_factor": "2",
        "nccl_iters": "20",
        "gpus": "8",
        "mpi_np": "16",
        "mpi_hosts": "gpu001:8,gpu002:8",
        "nccl_socket_ifname": "NCCL_SOCKET_IFNAME=eno1",
        "nccl_ib_hca": "NCCL_IB_HCA=mlx5",
        "nccl_ib_gid_index": "NCCL_IB_GID_INDEX=3",
        # A timeline read off a node (apps/benchmarks/kinds.py).
        "trace_file": "/var/log/traces/gpu001_4242.1700000000000.pt.trace.json.gz",
        "max_bytes": "67108864",
        # A training job's recovery (apps/diagnosis/commands.py).
        "checkpoint_step_dir": "/checkpoints/llm-pretrain/step_0002000",
        "step": "2000",
        "unit": "rackpilot-resume-llm",
        "rdzv_endpoint": "gpu001:29500",
        "node_rank": "0",
        "checkpoint_dir": "/checkpoints/llm-pretrain",
        "marker": "llm-r1a2b3c4d",
        # A Slurm resume on the scheduler's controller (apps/diagnosis/commands.py).
        "slurm_job": "llm-pretrain",
        "node_list": "gpu001,gpu002",
        "excluded_nodes": "gpu003",
        # Storage tiering (apps/costs/tiering_commands.py): the hot tier's files, one moved to warm.
        "directory": "/scratch",
        "older_than_days": "+6",
        "larger_than_bytes": "+0c",
        "file": "/scratch/datasets/tokenized/part-00001.bin",
        "file_to": "/shared/moved/part-00000.bin",
    }
    # Where one example does not fit every command (deployments' commands, when that app is installed).
    per_command = {
        "read-file": {"path": "/etc/os-release"},
        "tail-log": {"log_file": "/var/log/train/llm-pretrain.log"},
        "write-file": {"path": "/etc/nccl.conf"},
        "flash-firmware": {"path": "/var/lib/rackpilot/firmware/bios/2.0.0.cab"},
        "set-mtu": {"number": "9000"},
        "apt-install": {"package": "libnccl2=2.28.3-1+cuda13.0"},
        "sha256-check": {"checkpoint_path": "/checkpoints/llm-pretrain/SHA256SUMS"},
        "nvidia-smi-power-limit": {"number": "450"},  # within the H200's 200-700 W (apps/costs/commands.py)
        "mv-file": {"file": "/scratch/datasets/tokenized/part-00000.bin"},
        "mkdir-parents": {"file": "/shared/moved"},
        "resume-sbatch": {"number": "2"},  # --nodes matches the node list (Slurm refuses otherwise)
        "resume-sbatch-excluding": {"number": "2"},
    }
    # No training run keeps checkpoints on this node: the loader says so, as PyTorch's does.
    refused = {"checkpoint-load": "FileNotFoundError: [Errno 2] No such file or directory"}
    refused["trace-read"] = "no such file"  # no profiler wrote a trace on this node
    refused["tail-log"] = "cannot open"  # no training job logs on this node (a log outside the log directories
    # is refused before anything runs: tests/monitoring/test_read_paths.py)
    refused["lsof-under"] = ""  # nothing open there: lsof lists nothing and exits 1
    refused["kubectl-apply"] = 'error: the path "/checkpoints" does not exist'  # no manifest written there
    silent = {
        "true",
        "sleep",
        "write-file",
        "set-mtu",
        "set-channels",
        "daemon-reload",
        "scontrol-drain",
        "scontrol-resume",  # after scontrol-drain (the catalogue's order): gpu002 is drained, so it resumes
        "scontrol-reboot-asap",
        "remove-checkpoint",
        "resume-torchrun",
        "systemctl-reboot",
        "mkdir-parents",
        "mv-file",
        "kubectl-get-pods",  # no workload runs here: kubectl says "No resources found" on stderr, as it does
    }
    backend = SimulatorBackend()
    for name, command in CATALOGUE.items():
        values = examples | per_command.get(name, {})
        argv = command.build(**{placeholder: values[placeholder] for placeholder in command.placeholders})
        code, out, err, _ = backend.run(gpu_node, argv)
        if name in refused:
            assert code == 1 and refused[name] in err, (name, err)
            continue
        assert code == 0, (name, argv, err)
        assert out or name in silent, name


def test_a_node_without_gpus_has_no_nvidia_tools(demo_cluster):
    management = Node.objects.get(hostname="mgmt01")
    backend = SimulatorBackend()
    assert backend.run(management, ["nvidia-smi", "-L"]) == (127, "", "bash: nvidia-smi: command not found\n", 0.0)
    code, out, _, _ = backend.run(management, ["ip", "-j", "link"])
    assert code == 0 and '"ifname":"ens2np0"' in out


def test_a_session_reads_the_node_once_and_sees_its_own_changes_and_new_faults(gpu_node, django_assert_max_num_queries):
    from apps.parsers.network import parse_ethtool, parse_ip_link
    from apps.simulator.services import NodeSession, inject_fault

    def mtu(session) -> int:
        return parse_ip_link(session.run(["ip", "-j", "link"]).stdout).by_name()["ens1np0"].mtu

    def link_detected(session) -> bool:
        return parse_ethtool(session.run(["ethtool", "ens2np0"]).stdout).link_detected

    session = NodeSession(gpu_node)
    session.recheck_seconds = math.inf  # within the interval however slowly the lines below run (a loaded machine)
    assert mtu(session) == 9000
    with django_assert_max_num_queries(0):  # within the recheck interval the state serves without a query
        assert link_detected(session) is True
    assert session.run(["ip", "link", "set", "dev", "ens1np0", "mtu", "4200"]).exit_code == 0
    assert mtu(session) == 4200  # its own change, applied at once

    inject_fault(node=gpu_node, kind="nic_down", target="ens2np0")
    assert link_detected(session) is True  # not asked yet: the interval has not passed
    session.recheck_seconds = 0  # as once the interval has passed: it asks, sees the new fault, rebuilds
    assert link_detected(session) is False
    assert mtu(session) == 4200 and mtu(NodeSession(gpu_node)) == 4200  # the change was stored


def test_the_backend_session_answers_like_run(gpu_node):
    session = SimulatorBackend().session(gpu_node)
    assert session.run(["hostname"]) == SimulatorBackend().run(gpu_node, ["hostname"]) == (0, "gpu001\n", "", 0.0)
    assert SimulatorBackend().session("no-such-node").run(["true"])[0] == 255


@pytest.mark.django_db(transaction=True)
def test_simulated_sleeps_take_the_models_time_on_every_node_at_once(demo_cluster, run_shards, monkeypatch):
    """32 nodes × 2 sleeps of 3 s: each sleep's wait is in flight on all 32 nodes at once, as on 32 real nodes — not
    one thread-pool's worth of nodes at a time. Shown by order, not speed: each model wait is a gate that opens only
    once all 32 of its round are waiting (a backend running fewer at a time never fills it, and the job fails at the
    gate's bound), so a loaded machine that starts them slowly changes nothing."""
    from types import SimpleNamespace

    from apps.nodeexec import sim

    waits, gates = [], {}

    async def gated_sleep(seconds: float) -> None:
        waits.append(seconds)
        gate = gates.setdefault((len(waits) - 1) // 32, asyncio.Event())
        if len(waits) % 32 == 0:
            gate.set()
        await asyncio.wait_for(gate.wait(), 120)

    patched = {name: getattr(asyncio, name) for name in dir(asyncio) if not name.startswith("__")}
    monkeypatch.setattr(sim, "asyncio", SimpleNamespace(**{**patched, "sleep": gated_sleep}))
    job = jobs.create_job(
        kind="sleep",
        targets=jobs.TargetSpec(racks=("r01", "r02", "r03", "r04")),
        parameters={"seconds": 3, "steps": 2},
        transport="sim",
        queue=False,
    )
    assert job.node_count == 32
    job = run_shards(job)
    assert job.status == JobStatus.SUCCEEDED
    assert waits == [3.0] * 64  # the model's time, each sleep on each node: two gates of 32, both opened
    assert JobStep.objects.filter(job=job).count() == 64


@pytest.mark.django_db(transaction=True)
def test_a_simulated_sleep_past_its_timeout_times_out(demo_cluster):
    node = Node.objects.get(hostname="gpu001")
    target = NodeTarget(hostname=node.hostname, address=node.hostname, node_id=node.pk)

    async def main():
        session = await SimTransport().open(target)
        return await session.run(
            ["sleep", "30"], timeout=0.5, collector=OutputCollector(cap=1024), cancel=asyncio.Event(), grace=0.1
        )

    result = asyncio.run(main())
    assert result.timed_out and not result.canceled
