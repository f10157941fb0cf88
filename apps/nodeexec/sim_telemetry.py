"""The simulated cluster's telemetry source: in the embedded wiring the simulator stands where dcgm-exporter and vLLM
stand in the services wiring, and the telemetry interface and its recorder (apps.monitoring) reach its model through
the source apps.simulator registers here from its AppConfig.ready(), so no production code imports the simulator
(as the sim transport and the simulated BMCs of apps/nodeexec/sim.py).

What crosses the hook lives here too: the workloads the feature layer tells the model about (the simulator cannot
read apps.workloads), and the layout of a service's counters (vLLM's latency buckets, in the order the model sums
them).
"""

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from apps.nodeexec.base import TransportError

# vLLM's time-to-first-token boundaries; the simulated end-to-end histogram uses them too, so that 100 ms falls inside.
LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
INTEGRATION_STEP_S = 10.0  # the model integrates its rates on this grid; a finer step asks for nothing more


@dataclass(frozen=True)
class TrainingRun:
    name: str
    hostnames: tuple[str, ...]
    started: float  # unix time


@dataclass(frozen=True)
class ServingRun:
    name: str
    model: str
    hostnames: tuple[str, ...]
    design_tokens_per_second: float
    started: float
    sized_for: int = 0  # nodes the design throughput is sized for (scaled in: more than serve now); 0: hostnames


@dataclass(frozen=True)
class Workloads:
    training: tuple[TrainingRun, ...] = ()
    serving: tuple[ServingRun, ...] = ()


def split_counters(values: list[float]) -> dict:
    """A service's counters (the model's service_totals / service_counters list) as named parts."""
    size = len(LATENCY_BUCKETS)
    return {
        "generation_tokens": values[0],
        "requests": values[1],
        "e2e_sum": values[2],
        "ttft_sum": values[3],
        "e2e_buckets": values[4 : 4 + size],
        "ttft_buckets": values[4 + size :],
    }


@runtime_checkable
class TelemetrySource(Protocol):
    """Builds the telemetry model of the simulated nodes (these hostnames, or all) loaded with `workloads`: an object
    answering the questions apps.simulator.telemetry.ClusterTelemetry answers (node_readings, energy_j,
    service_totals, ...). Reads the database: call it where a query may run."""

    def __call__(self, *, workloads: Workloads, seed: int = 0, hostnames: list[str] | None = None): ...


_source: TelemetrySource | None = None


def register_telemetry_source(source: TelemetrySource | None) -> None:
    """Install the simulated cluster's telemetry (None removes it); apps.simulator calls this from its ready()."""
    global _source
    if source is not None and not callable(source):
        raise TypeError("a telemetry source is called as source(workloads=..., seed=..., hostnames=...)")
    _source = source


def telemetry_model(*, workloads: Workloads, seed: int = 0, hostnames: list[str] | None = None):
    """The simulated cluster's telemetry model, from the registered source."""
    if _source is None:
        raise TransportError("no simulator is installed (the embedded wiring's telemetry needs apps.simulator)")
    return _source(workloads=workloads, seed=seed, hostnames=hostnames)
