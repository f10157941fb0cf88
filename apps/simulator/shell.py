"""The simulated node's shell: argv in, (exit code, stdout, stderr) out, dispatched to one module per tool family.

The tools know only apps.simulator.terminal (their Context and CommandOutput); this module imports them all and is
the one place that maps a command name to its tool.
"""

from apps.simulator import training_tools
from apps.simulator.terminal import CommandOutput, Context, Tool, not_found, ok
from apps.simulator.tools import (
    bench,
    files,
    imex,
    loader,
    mpi,
    nccl,
    network,
    nvidia_smi,
    packages,
    scheduler,
    storage,
    system,
)

TOOLS: dict[str, Tool] = {
    name: tool
    for module in (
        nvidia_smi,
        imex,
        network,
        system,
        storage,
        loader,
        files,
        nccl,
        bench,
        packages,
        mpi,
        training_tools,
        scheduler,
    )
    for name, tool in module.COMMANDS.items()
}

GPU_TOOLS = {"nvidia-smi", "nvidia-bug-report.sh", "nvbandwidth", "dcgmi", "nvcc"} | set(nccl.BINARIES)

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


def run(context: Context, argv: list[str]) -> CommandOutput:
    context.shell = run  # a script the tool runs (sh -c ...) comes back here through context.run
    argv, env = unwrap(list(argv))
    context.env.update(env)
    if not argv:
        return ok("")
    name = argv[0].rsplit("/", 1)[-1]
    tool = TOOLS.get(name)
    if tool is None or (name in GPU_TOOLS and not context.state.gpus):
        return not_found(argv[0])  # a node without GPUs has no NVIDIA driver or CUDA tools installed
    return tool(context, argv)
