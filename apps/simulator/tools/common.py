"""Helpers the simulated tools share: the simulated clock, visible GPUs, readings, and util-linux style JSON."""

import json
from datetime import UTC, datetime

from apps.simulator.model import GpuReading, gpu_reading, noise
from apps.simulator.state import SimGpu
from apps.simulator.terminal import Context

# The simulated wall clock: fixed, so that the same state and seed print the same bytes.
SIM_NOW = datetime(2026, 11, 30, 9, 0, 0, tzinfo=UTC)


def ctime(moment: datetime = SIM_NOW) -> str:
    """'Mon Nov 30 09:00:00 2026', as C's ctime() and nvidia-smi print a moment (the day padded with a space)."""
    return f"{moment:%a %b} {moment.day:>2} {moment:%H:%M:%S %Y}"


def visible_gpus(context: Context) -> list[tuple[int, SimGpu]]:
    """The GPUs NVML enumerates, with the contiguous indexes it gives them (a lost GPU leaves no gap)."""
    return list(enumerate(context.state.visible_gpus))


def reading(context: Context, gpu: SimGpu, sample: int = 0) -> GpuReading:
    rng = noise(context.seed, context.state.hostname, "gpu", gpu.index, sample)
    return gpu_reading(gpu, load=context.load, rng=rng)


def memory_used_mib(gpu: SimGpu, load: float) -> int:
    """A GEMM loop holds about 1 GB of operands; an idle card holds nothing."""
    return 1011 if load > 0 else 0


def lost_gpu_warnings(context: Context) -> str:
    """What nvidia-smi says on stderr about a GPU that fell off the bus."""
    return "".join(
        f"Unable to determine the device handle for GPU{gpu.pci_bus_id[4:]}: Unknown Error\n"
        for gpu in context.state.lost_gpus
    )


def util_linux_json(value, indent: int = 0) -> str:
    """JSON the way util-linux (lsblk -J, lscpu -J) writes it: 3-space indents and '},{' between objects."""
    pad = " " * indent
    if isinstance(value, dict):
        items = [f'{pad}   "{key}": {util_linux_json(item, indent + 3)}' for key, item in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list):
        inner = ",".join(util_linux_json(item, indent + 3) for item in value)
        return f"[\n{pad}   {inner}\n{pad}]"
    return json.dumps(value)


def option_value(argv: list[str], *names: str) -> str | None:
    """The value of -x VALUE, --name VALUE or --name=VALUE."""
    for position, word in enumerate(argv):
        for name in names:
            if word == name and position + 1 < len(argv):
                return argv[position + 1]
            if name.startswith("--") and word.startswith(name + "="):
                return word[len(name) + 1 :]
            if not name.startswith("--") and word.startswith(name) and len(word) > len(name):
                return word[len(name) :]
    return None


def cpu_ranges(cpus: list[int]) -> str:
    """[0, 1, 2, 5] → '0-2,5', as topo -m and lscpu print CPU lists."""
    ranges, start, previous = [], None, None
    for cpu in sorted(cpus):
        if start is None:
            start = previous = cpu
        elif cpu == previous + 1:
            previous = cpu
        else:
            ranges.append((start, previous))
            start = previous = cpu
    if start is not None:
        ranges.append((start, previous))
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in ranges)
