"""A private Slurm controller for tests: Debian's slurmctld, run as the current user in a temporary directory with a
generated slurm.conf (auth/none, free ports, the given nodes declared at 127.0.0.1 without slurmd), driven through
the real `scontrol` and `sinfo` with SLURM_CONF pointing at it.

The host's Slurm by default; for topology/block (Slurm 23.11+), which bookworm's 22.05 lacks, Debian trixie's 24.11
unpacked by .ci/slurm-block into RACKPILOT_TEST_SLURM_ROOT (block_slurm below); for topology.yaml (Slurm 25.05+),
Debian forky's unpacked into RACKPILOT_TEST_SLURM_YAML_ROOT (yaml_slurm)."""

import getpass
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

STARTUP_DEADLINE_S = 60.0  # how long the controller may take to answer `scontrol ping` (a busy CI machine)
BINARIES = ("slurmctld", "scontrol", "sinfo")
BLOCK_SINCE = (23, 11)  # the first Slurm with topology/block
YAML_SINCE = (25, 5)  # the first Slurm that reads topology.yaml


@dataclass(frozen=True)
class Slurm:
    """Where a Slurm's programs are: the host's (`root` None), or one unpacked under `root` (.ci/slurm-block)."""

    root: Path | None = None

    def program(self, name: str) -> str:
        if self.root is None:
            return shutil.which(name) or f"/usr/sbin/{name}"
        return str(self.root / ("usr/sbin" if name == "slurmctld" else "usr/bin") / name)

    @property
    def plugin_dir(self) -> Path | None:
        """An unpacked Slurm's plugins (the host's are where its build put them)."""
        return None if self.root is None else self.root / "usr/lib" / f"{os.uname().machine}-linux-gnu" / "slurm-wlm"

    def missing(self) -> list[str]:
        return [name for name in BINARIES if not Path(self.program(name)).exists()]

    def version(self) -> tuple[int, ...]:
        answer = subprocess.run([self.program("slurmctld"), "-V"], capture_output=True, text=True, timeout=30)
        return tuple(int(part) for part in answer.stdout.split()[-1].split(".")[:2])


HOST = Slurm()


def missing_binaries() -> list[str]:
    return HOST.missing()


def block_slurm() -> tuple[Slurm | None, str]:
    """A Slurm with topology/block: the host's if new enough, else the one unpacked at RACKPILOT_TEST_SLURM_ROOT;
    (None, why) where there is none."""
    return _slurm_since(BLOCK_SINCE, "topology/block", "RACKPILOT_TEST_SLURM_ROOT")


def yaml_slurm() -> tuple[Slurm | None, str]:
    """A Slurm that reads topology.yaml: the host's if new enough, else the one unpacked at
    RACKPILOT_TEST_SLURM_YAML_ROOT; (None, why) where there is none."""
    return _slurm_since(YAML_SINCE, "topology.yaml", "RACKPILOT_TEST_SLURM_YAML_ROOT")


def _slurm_since(version: tuple[int, int], what: str, variable: str) -> tuple[Slurm | None, str]:
    if not HOST.missing() and HOST.version() >= version:
        return HOST, ""
    root = os.environ.get(variable, "")
    unpacked = Slurm(Path(root)) if root else None
    if unpacked is None or unpacked.missing() or unpacked.version() < version:
        return None, (
            f"no Slurm with {what} ({'.'.join(f'{part:02}' if n else str(part) for n, part in enumerate(version))}+) "
            f"here: the host's is older or absent, and {variable} names no Slurm unpacked by .ci/slurm-block"
        )
    return unpacked, ""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def slurm_conf(
    *,
    directory: Path,
    nodes: list[str],
    user: str,
    controller_port: int,
    node_port: int,
    topology: bool = False,
    plugin: str = "tree",
    plugin_dir: Path | None = None,
    partitions: tuple[str, ...] = (),
) -> str:
    """A minimal slurm.conf for one controller on this host and the given nodes (no slurmd runs for them); with
    `topology`, the tree plugin reading topology.conf beside it."""
    lines = [
        "ClusterName=rackpilot-test",
        f"SlurmctldHost={socket.gethostname().split('.')[0]}(127.0.0.1)",
        f"SlurmctldPort={controller_port}",
        f"SlurmdPort={node_port}",
        "AuthType=auth/none",  # the Debian build ships auth_none.so: no munged needed
        "CredType=cred/none",
        f"SlurmUser={user}",
        f"StateSaveLocation={directory / 'state'}",
        f"SlurmdSpoolDir={directory / 'spool'}",
        f"SlurmctldPidFile={directory / 'slurmctld.pid'}",
        f"SlurmctldLogFile={directory / 'slurmctld.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SwitchType=switch/none",
        "MpiDefault=none",
        *([f"PluginDir={plugin_dir}"] if plugin_dir else []),
        "MailProg=/bin/true",
        "RebootProgram=/bin/true",  # scontrol reboot is refused without one
        "ReturnToService=2",
        *(f"NodeName={node} NodeAddr=127.0.0.1 CPUs=1 RealMemory=1 State=UNKNOWN" for node in nodes),
        "PartitionName=gpu Nodes=ALL Default=YES State=UP",
        *partitions,
        *([f"TopologyPlugin=topology/{plugin}"] if topology else []),
    ]
    return "\n".join(lines) + "\n"


@dataclass
class Controller:
    conf: Path
    log: Path
    process: subprocess.Popen
    slurm: Slurm = HOST

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *argv: str) -> subprocess.CompletedProcess:
        program, *arguments = argv
        return subprocess.run(
            [self.slurm.program(program), *arguments], env=self.env, capture_output=True, text=True, timeout=30
        )

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_controller(
    directory: Path,
    nodes: list[str],
    *,
    topology: str | None = None,
    plugin: str = "tree",
    topology_yaml: str | None = None,
    partitions: tuple[str, ...] = (),
    slurm: Slurm = HOST,
) -> Controller:
    """A controller for `nodes`; `topology`: the text of a topology.conf to start it with (topology/`plugin`);
    `topology_yaml`: of a topology.yaml beside slurm.conf instead (its topologies name their plugins); `partitions`:
    slurm.conf lines beside the default partition of every node; `slurm`: whose programs."""
    for sub in ("state", "spool"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    if topology is not None:
        (directory / "topology.conf").write_text(topology)
    if topology_yaml is not None:
        (directory / "topology.yaml").write_text(topology_yaml)
    conf = directory / "slurm.conf"
    conf.write_text(
        slurm_conf(
            directory=directory,
            nodes=nodes,
            user=getpass.getuser(),
            controller_port=_free_port(),
            node_port=_free_port(),
            topology=topology is not None,
            plugin=plugin,
            plugin_dir=slurm.plugin_dir,
            partitions=partitions,
        )
    )
    binary = slurm.program("slurmctld")
    output = open(directory / "slurmctld.out", "wb")  # noqa: SIM115 (kept open for the daemon's life)
    process = subprocess.Popen(
        [binary, "-D", "-i", "-f", str(conf)], stdout=output, stderr=subprocess.STDOUT, env={**os.environ}
    )
    controller = Controller(conf, directory / "slurmctld.log", process, slurm)
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    while time.monotonic() < deadline:  # a readiness wait, not a timing: each try returns as soon as it is up
        if process.poll() is not None:
            break
        if "is UP" in controller.run("scontrol", "ping").stdout:
            return controller
        time.sleep(0.2)
    controller.stop()
    log = (directory / "slurmctld.out").read_text(errors="replace")[-2000:]
    raise RuntimeError(f"slurmctld did not come up (exit {process.returncode}):\n{log}")
