"""The command catalogue: values are checked against strict patterns, and quoted when joined for a shell."""

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from apps.nodeexec.catalogue import CATALOGUE, CommandError, build, shell_join

ROOT = Path(__file__).resolve().parents[2]

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
                # The per-node suites (apps/benchmarks/kinds.py).
                "gpu_affinity": "0:1",
                "hpl_n": "20000",
                "hpl_nb": "1024",
                "hpl_p": "1",
                "hpl_q": "1",
                "nvbandwidth_cases": "device_local_copy",
                "interval_ms": "1000",
                "dcgm_level": "3",
                # the scheduler drain commands (apps/deployments/node_operations.py)
                "scheduler_node": "gpu002",
                "slurm_node": "NodeName=gpu002",
                "slurm_reason": "Reason=fan swap (ticket 42)",
                "slurm_reboot_reason": "reason=firmware update",
                "k8s_quarantine_taint": "rackpilot.io/quarantine=xid79:NoSchedule",
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


# --- placeholders inside an element, and what registration refuses --------------------------------------------------


@pytest.fixture
def scratch_registry(monkeypatch):
    """Commands and placeholders a test registers are gone after it."""
    from apps.nodeexec import catalogue

    monkeypatch.setattr(catalogue, "CATALOGUE", dict(catalogue.CATALOGUE))
    monkeypatch.setattr(catalogue, "PLACEHOLDERS", dict(catalogue.PLACEHOLDERS))
    return catalogue


def test_a_placeholder_inside_an_element_is_filled_and_checked(scratch_registry):
    c = scratch_registry
    c.register_command(
        c.Command("t-mtu", ("cat", "/sys/class/net/{interface}/mtu"), "An MTU.", placeholders=("interface",))
    )
    assert c.build("t-mtu", interface="ens1f0np0") == ["cat", "/sys/class/net/ens1f0np0/mtu"]
    for value in NASTY:
        with pytest.raises(CommandError) as refused:
            c.build("t-mtu", interface=value)
        assert refused.value.field_name == "interface"
    # needs_root and the sudo wrapper recognise the filled-in template, and only it
    assert c.get_command("t-mtu").matches(["cat", "/sys/class/net/ens1f0np0/mtu"])
    assert not c.get_command("t-mtu").matches(["cat", "/sys/class/net/a/b/mtu"])
    assert not c.get_command("t-mtu").matches(["cat", "/sys/class/net/{interface}/mtu"])


@pytest.mark.parametrize("value", ["a/b", "..", ".", "a b", "a\tb", "", "x\x7fy"])
def test_inside_an_element_a_value_is_one_plain_word_whatever_its_pattern(scratch_registry, value):
    c = scratch_registry
    c.register_placeholder("t_loose", c.Placeholder(r"[^\n\x00]{0,40}", "anything on one line"))
    c.register_command(c.Command("t-loose", ("ls", "/srv/{t_loose}/x", "{t_loose}"), "", placeholders=("t_loose",)))
    with pytest.raises(CommandError, match="cannot go inside") as refused:
        c.build("t-loose", t_loose=value)
    assert refused.value.field_name == "t_loose"


def test_a_path_placeholder_may_span_segments_inside_an_element_but_never_climb(scratch_registry):
    c = scratch_registry
    c.register_placeholder("t_rel", c.Placeholder(r"[a-z./]{1,40}", "a relative path", slashes=True))
    c.register_command(c.Command("t-rel", ("cat", "--file=/srv/{t_rel}"), "", placeholders=("t_rel",)))
    assert c.build("t-rel", t_rel="logs/today") == ["cat", "--file=/srv/logs/today"]
    for value in ("a/../b", "../etc", "a/./b", "a//b"):
        with pytest.raises(CommandError, match="cannot go inside"):
            c.build("t-rel", t_rel=value)


@pytest.mark.parametrize(
    ("argv", "placeholders", "error"),
    [
        (("cat", "/sys/class/net/{interface}/mtu"), (), "not one of its placeholders"),
        (("cat", "{nowhere}"), ("nowhere",), "unknown placeholder {nowhere}"),
        (("sh", "-c", "ip link show {interface}"), ("interface",), "not a plain word"),
        (("sh", "-c", 'cat "/sys/class/net/{interface}/mtu"'), ("interface",), "not a plain word"),
        (("sh", "-c", 'ip link show "${interface}"', "sh", "{interface}"), ("interface",), "shell expansion"),
        (("ip", "link"), ("interface",), "never uses"),
    ],
)
def test_registration_refuses_a_template_the_executor_could_not_fill_as_written(
    scratch_registry, argv, placeholders, error
):
    c = scratch_registry
    with pytest.raises(CommandError, match=error):
        c.register_command(c.Command("t-bad", argv, "", placeholders=placeholders))
    assert "t-bad" not in c.CATALOGUE


def test_shell_text_with_braces_that_are_not_placeholders_registers_as_it_is(scratch_registry):
    c = scratch_registry
    script = 'for f in "$@"; do echo "${f%%.*}" | awk \'{print $1}\'; done'
    c.register_command(c.Command("t-script", ("sh", "-c", script, "sh", "{path}"), "", placeholders=("path",)))
    assert c.build("t-script", path="/tmp/a.b") == ["sh", "-c", script, "sh", "/tmp/a.b"]


def test_a_placeholder_name_is_registered_once_with_one_meaning(scratch_registry):
    c = scratch_registry
    c.register_placeholder("t_once", c.Placeholder(r"[0-9]{1,3}", "a small number"))
    c.register_placeholder("t_once", c.Placeholder(r"[0-9]{1,3}", "a small number"))  # the same again: no-op
    with pytest.raises(CommandError, match="already registered"):
        c.register_placeholder("t_once", c.Placeholder(r"[0-9]{1,9}", "a number"))
    with pytest.raises(CommandError, match="placeholder name"):
        c.register_placeholder("Bad-Name", c.Placeholder(r"x", "x"))
    with pytest.raises(CommandError, match="does not compile"):
        c.register_placeholder("t_broken", c.Placeholder(r"[0-9", "x"))


def test_nodeexec_registers_only_generic_placeholders_features_register_their_own():
    # A fresh interpreter with nodeexec alone: no benchmark, deployment or runbook vocabulary in it.
    code = "from apps.nodeexec.catalogue import PLACEHOLDERS; print(' '.join(sorted(PLACEHOLDERS)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    alone = set(out.stdout.split())
    assert {"interface", "seconds", "path", "marker"} <= alone
    assert not alone & {"hpl_n", "nccl_binary", "mpi_hosts", "pfc_mask", "package", "slurm_reason", "step", "unit"}
    from apps.nodeexec.catalogue import PLACEHOLDERS

    assert {"hpl_n", "pfc_mask", "slurm_reason", "checkpoint_step_dir"} <= set(PLACEHOLDERS)  # the apps added theirs


def test_the_reapers_unregistered_command_passes_the_same_template_checks():
    from apps.nodeexec.catalogue import END_MARKED, check_template

    check_template(END_MARKED)  # built by apps.jobs.orphans, never registered: held to the same rules
    assert END_MARKED.build(marker="abc:0", seconds="3")[-2:] == ["abc:0", "3"]
