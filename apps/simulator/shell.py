"""The simulated node's shell: argv in, (exit code, stdout, stderr) out, dispatched to one module per tool family."""

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from apps.simulator.state import SimulatedNode


@dataclass(frozen=True)
class CommandOutput:
    exit_code: int
    stdout: str
    stderr: str = ""

    def as_tuple(self) -> tuple[int, str, str]:
        return self.exit_code, self.stdout, self.stderr


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
    ):
        if state is None and loader is None:
            raise ValueError("a Context needs a state or a loader")
        self._state, self._loader, self._hostname = state, loader, hostname
        self.seed, self.load = seed, load
        self.env: dict[str, str] = dict(env or {})  # NAME=VALUE given through `env` (what NCCL reads first)
        self.changes: dict[str, object] = {}  # what the command changed, for the caller to store

    def change(self, key: str, value) -> None:
        """Record a change the command makes and apply it to the state, so the rest of the command sees it."""
        from apps.simulator.changes import apply_change

        apply_change(self.state, key, value)
        self.changes[key] = value

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


def _registry() -> dict[str, Tool]:
    from apps.simulator.tools import bench, nccl, network, nvidia_smi, packages, storage, system

    tools: dict[str, Tool] = {}
    for module in (nvidia_smi, network, system, storage, nccl, bench, packages):
        tools.update(module.COMMANDS)
    return tools


_TOOLS: dict[str, Tool] | None = None


def tools() -> dict[str, Tool]:
    global _TOOLS
    if _TOOLS is None:
        _TOOLS = _registry()
    return _TOOLS


GPU_TOOLS = {"nvidia-smi", "nvbandwidth", "dcgmi", "nvcc"} | {
    f"{name}_perf"
    for name in ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv")
}

# Wrappers a catalogue may put in front of a command; the simulator runs what they wrap.
TRANSPARENT_PREFIXES = {"sudo", "timeout", "nice", "stdbuf", "env"}


def unwrap(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """The wrapped command, and the NAME=VALUE assignments an `env` in front gave it."""
    env: dict[str, str] = {}
    while argv and argv[0] in TRANSPARENT_PREFIXES:
        head, argv = argv[0], argv[1:]
        if head == "timeout" and argv:
            argv = argv[1:]  # the duration
        while argv and (argv[0].startswith("-") or (head == "env" and "=" in argv[0])):
            if head == "env" and "=" in argv[0] and not argv[0].startswith("-"):
                name, _, value = argv[0].partition("=")
                env[name] = value
            argv = argv[1:]
    return argv, env


def _unwrap(argv: list[str]) -> list[str]:
    return unwrap(argv)[0]


def run(context: Context, argv: list[str]) -> CommandOutput:
    argv, env = unwrap(list(argv))
    context.env.update(env)
    if not argv:
        return ok("")
    name = argv[0].rsplit("/", 1)[-1]
    tool = tools().get(name)
    if tool is None or (name in GPU_TOOLS and not context.state.gpus):
        return not_found(argv[0])  # a node without GPUs has no NVIDIA driver or CUDA tools installed
    return tool(context, argv)
