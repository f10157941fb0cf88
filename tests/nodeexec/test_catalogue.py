"""The command catalogue: values are checked against strict patterns, and quoted when joined for a shell."""

import shlex
import subprocess

import pytest

from apps.nodeexec.catalogue import CATALOGUE, CommandError, build, shell_join

NASTY = [
    "eth0; reboot",
    "$(touch /tmp/pwned)",
    "`id`",
    "eth0 && id",
    "a|b",
    "a>b",
    "x\ny",
    "'",
    '"',
    "a b",
    "--help",
    "../../etc",
    "",
    "ethernet-interface-name-too-long",
    "${IFS}",
]


@pytest.mark.parametrize("value", NASTY)
def test_values_outside_the_pattern_are_refused(value):
    with pytest.raises(CommandError) as refused:
        build("ip-link-show", interface=value)
    assert refused.value.field_name == "interface"


def test_a_value_fills_exactly_one_argv_element():
    assert build("ip-link-show", interface="ens1f0np0") == ["ip", "-j", "link", "show", "dev", "ens1f0np0"]
    assert build("sleep", seconds="2.5") == ["sleep", "2.5"]
    with pytest.raises(CommandError):
        build("sleep")
    with pytest.raises(CommandError):
        build("uname", interface="eth0")


@pytest.mark.parametrize("value", ["relative/x", "/a/../etc/passwd", "/..", "/a//b", "/a\nb", "/a\x00b", ""])
def test_a_file_path_is_absolute_one_line_and_never_climbs(value):
    with pytest.raises(CommandError) as refused:
        build("mv-file", file=value, file_to="/shared/x")
    assert refused.value.field_name == "file"


def test_a_file_path_with_spaces_and_metacharacters_is_one_element_after_double_dash():
    name = "/scratch/a b; rm -rf ~ $(id) `id` 'q' \"d\" &|<>*?.bin"
    argv = build("mv-file", file=name, file_to="/shared/x")
    assert argv == ["mv", "-n", "-T", "--", name, "/shared/x"]
    assert shlex.split(shell_join(argv)) == argv


def test_every_catalogue_command_joins_back_to_its_argv():
    for command in CATALOGUE.values():
        values = {
            name: {
                "interface": "lo",
                "interfaces": "lo,eth0",
                "seconds": "1",
                "gpu_index": "0",
                "path": "/tmp",
                "number": "9000",
                # storage tiering: a found file's name may hold spaces and shell metacharacters
                "directory": "/scratch",
                "older_than_days": "+6",
                "larger_than_bytes": "+0c",
                "file": '/scratch/eval "v2" & $HOME; notes.txt',
                "file_to": '/shared/eval "v2" & $HOME; notes.txt',
                "pfc_mask": "0,0,0,1,0,0,0,0",
                "package": "libnccl2=2.26.2-1+cuda12.8",
                "requirement": "torch==2.7.1",
                "base64": "aGVsbG8=",
                # the scheduler drain commands (apps/deployments/node_operations.py)
                # The per-node suites (apps/benchmarks/kinds.py).
                "gpu_affinity": "0:1",
                "hpl_n": "20000",
                "hpl_nb": "1024",
                "hpl_p": "1",
                "hpl_q": "1",
                "nvbandwidth_cases": "device_local_copy",
                "interval_ms": "1000",
                "dcgm_level": "3",
                "scheduler_node": "gpu002",
                "slurm_node": "NodeName=gpu002",
                "slurm_reason": "Reason=fan swap (ticket 42)",
                # apps/benchmarks' placeholders, when that app is installed
                "nccl_binary": "all_reduce_perf",
                "nccl_bytes": "8",
                "nccl_max_bytes": "17179869184",
                "nccl_step_factor": "2",
                "nccl_iters": "20",
                "gpus": "8",
                "mpi_np": "16",
                "mpi_hosts": "gpu001:8,gpu002:8",
                "nccl_socket_ifname": "NCCL_SOCKET_IFNAME=^lo,docker",
                "nccl_ib_hca": "NCCL_IB_HCA==mlx5_0:1",
                "nccl_ib_gid_index": "NCCL_IB_GID_INDEX=3",
                "trace_file": "/var/log/traces/w0_r1@host+x-y.1700000000.pt.trace.json.gz",
                "max_bytes": "67108864",
                # A training job's recovery (apps/diagnosis/commands.py).
                "checkpoint_step_dir": "/checkpoints/llm/step_0002000",
                "step": "2000",
                "unit": "rackpilot-resume-llm",
                "rdzv_endpoint": "gpu001:29500",
                "node_rank": "0",
                "checkpoint_dir": "/checkpoints/llm",
                # What training progress and the runbooks read (confined to their settings' directories).
                "log_file": "/var/log/train/llm.log",
                "checkpoint_path": "/checkpoints/llm/step_0002000/manifest.sha256",
                "marker": "llm-r1a2b3c4d",
                # A Slurm resume on the scheduler's controller.
                "slurm_job": "llm",
                "node_list": "gpu001,gpu004",
                "excluded_nodes": "gpu002",
            }[name]
            for name in command.placeholders
        }
        argv = command.build(**values)
        assert shlex.split(shell_join(argv)) == argv


def test_shell_join_keeps_metacharacters_literal(tmp_path):
    target = tmp_path / "pwned"
    hostile = [f"$(touch {target})", f"`touch {target}`", f"; touch {target}", "'quoted' \"twice\""]
    out = subprocess.run(["sh", "-c", shell_join(["printf", "%s\\n", *hostile])], capture_output=True, text=True)
    assert out.stdout.splitlines() == hostile
    assert not target.exists()


def test_a_slurm_resume_refuses_a_node_list_that_is_not_node_names():
    from apps.diagnosis import commands  # noqa: F401  (registers the resume commands)
    from apps.nodeexec.catalogue import CommandError, build

    values = {"slurm_job": "llm", "number": "2", "gpus": "8", "path": "/w/train.sbatch", "step": "2"}
    values |= {"checkpoint_dir": "/checkpoints/llm"}
    for bad in ("gpu001;reboot", "gpu001, gpu002", "$(id)", ""):
        with pytest.raises(CommandError, match="node_list"):
            build("resume-sbatch", node_list=bad, **values)
