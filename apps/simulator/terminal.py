"""What a simulated tool is given and gives back: the Context of one command, and its CommandOutput.

Tools import this module, never apps.simulator.shell: the shell imports every tool to dispatch to it, so a tool that
needs the shell (a script running other commands) reaches it through Context.run, which the shell fills in.
"""

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from apps.simulator.changes import apply_change
from apps.simulator.state import SimulatedNode


@dataclass(frozen=True)
class CommandOutput:
    """What a simulated command answers, and how long the real one would take (`seconds`, from the model): the
    sim transport waits that long without holding a thread, so timing, timeouts and cancel follow the model."""

    exit_code: int
    stdout: str
    stderr: str = ""
    seconds: float = 0.0

    def as_tuple(self) -> tuple[int, str, str]:
        return self.exit_code, self.stdout, self.stderr

    def as_answer(self) -> tuple[int, str, str, float]:
        return self.exit_code, self.stdout, self.stderr, self.seconds


@dataclass(frozen=True)
class ClusterHost:
    """A compute node as the scheduler's configuration declares it (slurm.conf's NodeName line)."""

    hostname: str
    cpus: int
    gpus: int
    memory_mib: int


class Context:
    """What a tool sees: the node's state, the seed for its noise, and how busy the GPUs are (0 idle .. 1 GEMM).

    The state is built on first use, so `true`, `sleep` or `hostname` cost no inventory reads (fan-out benchmarks).
    """

    def __init__(
        self,
        *,
        state: SimulatedNode | None = None,
        loader: Callable[[], SimulatedNode] | None = None,
        hostname: str | None = None,
        seed: int = 0,
        load: float = 0.0,
        env: dict[str, str] | None = None,
        peers: Callable[[str], SimulatedNode | None] | None = None,
        read_peers: Callable[[list[str]], None] | None = None,
        real_time: bool = False,
        cluster: "Callable[[], list[ClusterHost]] | None" = None,
    ):
        if state is None and loader is None:
            raise ValueError("a Context needs a state or a loader")
        self._state, self._loader, self._hostname = state, loader, hostname
        self.seed, self.load = seed, load
        self.real_time = real_time  # long benchmarks take the model's time too (else only `sleep` does)
        self.env: dict[str, str] = dict(env or {})  # NAME=VALUE given through `env` (what NCCL reads first)
        self.changes: dict[str, object] = {}  # what the command changed, for the caller to store
        self.reboot_requested = False  # `systemctl reboot`: the caller reboots the node (services.reboot)
        self.peer_changes: dict[str, dict[str, object]] = {}  # host name -> what it changed on another node
        self.memo: dict = {}  # what a tool computed once for this command (a training run's checkpoints)
        self.shell: Callable[[Context, list[str]], CommandOutput] | None = None  # set by the shell that runs us
        # Another simulated node's state by host name (None: no such host), for launchers such as mpirun that
        # start processes on several nodes; None when the caller offers no other nodes.
        self.peers = peers
        self._read_peers = read_peers
        # The cluster's compute nodes as a scheduler's controller declares them (sinfo, scontrol show node); None
        # when the caller offers none.
        self.cluster = cluster

    def read_peers(self, hostnames: list[str]) -> None:
        """Say which nodes `peers` is about to be asked for, so that the caller reads them together (a launcher
        reaching thousands of nodes), not one query at a time; a caller that offers no such read ignores it."""
        if self._read_peers is not None:
            self._read_peers(hostnames)

    def change(self, key: str, value) -> None:
        """Record a change the command makes and apply it to the state, so the rest of the command sees it."""
        apply_change(self.state, key, value)
        self.changes[key] = value

    def change_on(self, hostname: str, key: str, value) -> None:
        """Record a change the command makes on another node it reached (mpirun's traffic through a peer's NICs)."""
        if hostname == self.hostname:
            self.change(key, value)
            return
        peer = self.peers(hostname) if self.peers is not None else None
        if peer is None:
            return
        apply_change(peer, key, value)
        self.peer_changes.setdefault(hostname, {})[key] = value

    def run(self, argv: list[str]) -> CommandOutput:
        """Run another command on the same node, as a script does, through the shell running this one."""
        if self.shell is None:
            raise RuntimeError("Context.run needs the shell: run the outer command with apps.simulator.shell.run")
        return self.shell(self, argv)

    @cached_property
    def state(self) -> SimulatedNode:
        return self._state if self._state is not None else self._loader()

    @property
    def hostname(self) -> str:
        return self._hostname or self.state.hostname


Tool = Callable[[Context, list[str]], CommandOutput]


def ok(stdout: str) -> CommandOutput:
    return CommandOutput(0, stdout, "")


def fail(exit_code: int, stderr: str, stdout: str = "") -> CommandOutput:
    return CommandOutput(exit_code, stdout, stderr)


def not_found(name: str) -> CommandOutput:
    return CommandOutput(127, "", f"bash: {name}: command not found\n")
