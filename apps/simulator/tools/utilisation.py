"""A running training job as its GPUs show it: `sh -c UTILISATION_SCRIPT` (nvidia-smi --query-gpu=UTILISATION_FIELDS
--format=csv,nounits -lms INTERVAL for N seconds).

The model, so that a test can predict the series:
- each rank of the job (the node's first `ranks_per_node` GPUs) works at a speed: its loaded SM clock (power limit,
  clock cap, thermal slowdown: telemetry.gpu_regime) over the SKU's nominal one, times the node's share when a second
  trainer is placed on it (the co_located fault);
- every rank waits for the slowest one at each all-reduce, so a rank is busy BUSY x slowest / own speed of the time:
  the slow rank stays busy, the others' utilisation drops;
- a starving data loader (dataloader_stall on any node of the job) idles every rank of the job together for
  `stall_pct` percent of every `period_s`, counted from the job's start;
- a GPU outside the job, or of a node running no job, is idle. Seeded noise moves the printed utilisation by at most
  two points, and the clocks and power as the nvidia-smi model does.
(`kubectl get pods` of the same nodes is in tools/scheduler.py.)
"""

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from apps.nodeexec.catalogue import SOAK_SAMPLES_MARK, UTILISATION_FIELDS
from apps.simulator import clock
from apps.simulator.model import gpu_reading, noise
from apps.simulator.state import SimGpu, SimulatedNode
from apps.simulator.telemetry import gpu_regime, nominal_mhz
from apps.simulator.terminal import CommandOutput, Context, ok
from apps.simulator.tools.nvidia_smi import _field_value, _printed
from apps.simulator.training import TrainingRun, runs_on

BUSY = 0.96  # a healthy rank's share of kernel time between steps
STALLED_BUSY = 0.05  # waiting for a batch: only the odd kernel runs
NOISE_POINTS = 2.0
NAMESPACE = "training"  # the job's pods


def _ranks(state: SimulatedNode, run: TrainingRun) -> list[SimGpu]:
    return sorted(state.visible_gpus, key=lambda gpu: gpu.index)[: run.ranks_per_node]


def _speed(state: SimulatedNode, gpu: SimGpu) -> float:
    return gpu_regime(gpu, state.faults).load_mhz / nominal_mhz(gpu) * state.co_located_speed


def job_states(context: Context, run: TrainingRun) -> list[SimulatedNode]:
    states = []
    for host in run.hosts:
        state = context.state if host == context.hostname else (context.peers(host) if context.peers else None)
        if state is not None:
            states.append(state)
    return states


def busy_fractions(context: Context, run: TrainingRun, at: float) -> dict[int, float]:
    """GPU index -> busy fraction of this node's ranks at unix time `at`."""
    states = job_states(context, run)
    speeds = [_speed(state, gpu) for state in states for gpu in _ranks(state, run)]
    slowest = min((speed for speed in speeds if speed > 0), default=1.0)
    stall = next((state.dataloader_stall for state in states if state.dataloader_stall), None)
    stalled = False
    if stall is not None:
        period, share = stall
        stalled = math.fmod(max(at - run.started, 0.0), period) < period * share / 100
    return {
        gpu.index: STALLED_BUSY if stalled else BUSY * slowest / max(_speed(context.state, gpu), slowest)
        for gpu in _ranks(context.state, run)
    }


def _header() -> str:
    names = [_printed(name) for name in UTILISATION_FIELDS.split(",")]
    units = {"utilization.gpu": "%", "clocks.current.sm": "MHz", "power.draw": "W", "power.limit": "W"}
    units["power.default_limit"] = "W"
    return ", ".join(f"{name} [{units[name]}]" if name in units else name for name in names)


def samples(context: Context, duration: str, interval_ms: str, now: float | None = None) -> CommandOutput:
    """What the script prints: nothing of `sleep`, the marker, then the sampler's rows (one per GPU per sample)."""
    seconds, step = int(float(duration)), max(int(interval_ms), 1) / 1000
    start = clock.now() if now is None else now
    run = next(iter(runs_on(context.hostname)), None)
    names = [_printed(name) for name in UTILISATION_FIELDS.split(",")]
    lines = [_header()]
    for sample in range(int(seconds / step) + 1):
        at = start + sample * step
        moment = datetime.fromtimestamp(0, UTC) + timedelta(seconds=at)
        stamp = f"{moment:%Y/%m/%d %H:%M:%S}.{moment.microsecond // 1000:03d}"
        busy = busy_fractions(context, run, at) if run is not None else {}
        for index, gpu in enumerate(context.state.visible_gpus):
            load = busy.get(gpu.index, 0.0)
            rng = noise(context.seed, context.state.hostname, "utilisation", gpu.index, sample)
            reading = gpu_reading(gpu, load=load, rng=rng)
            shown = min(100, max(0, round(100 * load + rng.uniform(-NOISE_POINTS, NOISE_POINTS)))) if load else 0
            reading = replace(reading, util_gpu=shown)
            cells = []
            for name in names:
                if name == "timestamp":
                    cells.append(stamp)
                    continue
                unit, text = _field_value(name, index, gpu, reading, load, context.state.driver_version)
                cells.append(text.rsplit(" ", 1)[0] if unit else text)
            lines.append(", ".join(cells))
    return ok(f"{SOAK_SAMPLES_MARK}\n" + "\n".join(lines) + "\n")
