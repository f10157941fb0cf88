"""What the simulated GPUs and inference services would report to a monitoring system, as functions of time.

Every value at time t comes from the seed, t, the workloads running at t and the faults active at t (a fault is active
from the moment it was injected; a cleared fault leaves no history), so any window can be asked for and two readers
(a Prometheus scraping the exporters, the telemetry interface asking directly) see the same series.

GPUs: a GPU's busy fraction L(t) comes from its node's workload: a training job keeps its GPUs ~93% busy with a slow
wave (the step loop, data loading, checkpoints); its ranks wait for the slowest node at every all-reduce, so a
straggler lowers the utilisation of every other node of the job. A service's GPUs are as busy as its demand (a daily
wave) over its capacity. Under load a card runs at the clock its faults allow (power limit, clock cap, thermal
slowdown); power is the static share plus L times the dynamic share at that clock (the calibration of
apps.simulator.model), so the energy counter is the exact integral of the power gauge without its noise.

NICs: each link at its cable's trained rate (a degraded cable's lower one); each receives a steady stream of frames
from boot, of which a degraded cable corrupts its share per million from the fault on (node_exporter's receive
errors).

Services: tokens/s served is min(demand, capacity), where capacity is the design throughput times the mean speed of
its nodes (a card at a lower clock decodes slower; a node with a GPU off the bus serves nothing). Latency follows the
load: flat until ~80% of capacity, then rising steeply, queueing past 100%. vLLM restarts once a day (at a seeded
time), so its counters reset as a real one's do.
"""

import bisect
import copy
import functools
import math
from dataclasses import dataclass, field, replace

from apps.nodeexec.sim_telemetry import (  # what the feature layer tells the model, and its counters' layout
    INTEGRATION_STEP_S,
    LATENCY_BUCKETS,
    ServingRun,
    TrainingRun,
    Workloads,
)
from apps.simulator.changes import apply_changes
from apps.simulator.faults.node import apply_faults
from apps.simulator.model import (
    IDLE_POWER_W,
    REASON_BITS,
    STATIC_POWER_W,
    THERMAL_SLOWDOWN_MHZ,
    clock_at_power_cap,
    noise,
    power_demand_w,
    quantise_clock,
)
from apps.simulator.state import SimGpu, SimulatedNode

DAY = 86400.0
TRAINING_BUSY = 0.93  # mean busy fraction of a healthy training rank: the rest is data loading and checkpoints
TRAINING_WAVE = 0.05
TRAINING_PERIOD_S = 600.0
DEMAND_MEAN = 0.5  # of the design throughput, over a day
DEMAND_WAVE = 0.2
SM_ACTIVE_PER_BUSY = {"training": 0.82, "serving": 0.45}  # GEMMs keep SMs busy; decoding waits on HBM
DRAM_ACTIVE_PER_BUSY = {"training": 0.35, "serving": 0.72}
FB_USED_SHARE = {"training": 0.88, "serving": 0.9}  # vLLM's gpu_memory_utilization=0.9
OUTPUT_TOKENS_PER_REQUEST = 6  # the demo serves short completions, so a p99 target of 100 ms means something
PROMPT_TOKENS_PER_OUTPUT_TOKEN = 1.6
E2E_MEDIAN_S = 0.045
E2E_SIGMA = 0.3  # of the log-normal spread of request latencies
TTFT_MEDIAN_S = 0.012
TTFT_SIGMA = 0.5
NVLINK_CRC_ERRORS_PER_S = 0.7  # a failing link's flit CRC errors, from the fault on
# The last XID the driver logged for a fault (what DCGM_FI_DEV_XID_ERRORS shows; the kernel log's lines say the same):
# 48 double-bit ECC error, 74 NVLink error, 79 fallen off the bus.
XID_OF_FAULT = {"xid79": 79, "ecc": 48, "nvlink_down": 74}
# DCGM_FI_IMEX_DAEMON_STATUS's values (nvidia-imex-ctl -q): 5 READY, 7 UNAVAILABLE.
IMEX_READY, IMEX_UNAVAILABLE = 5, 7
# Frames a data NIC receives each second (the node's collectives and storage: a steady mean; the counters only need
# to grow as a real NIC's do). A degraded cable corrupts its crc_per_million of them from the fault on.
NIC_FRAMES_PER_S = 200_000

_SERVICE_GRIDS: dict = {}  # a service's counters on the integration grid since its last restart
# gpu_reading's keys in its order, and those that come from the seeded noise (the costly part of a reading).
READING_ORDER = (
    "util",
    "sm_active",
    "dram_active",
    "power_w",
    "energy_mj",
    "temperature_c",
    "memory_temperature_c",
    "sm_mhz",
    "mem_mhz",
    "reasons",
    "power_limit_w",
    "xid",
    "ecc_dbe",
    "remap_pending",
    "remap_failure",
    "pcie_gen",
    "pcie_width",
    "pcie_max_gen",
    "pcie_max_width",
    "nvlink_crc_errors",
    "fb_used_mib",
    "fb_free_mib",
)
ALL_READING_KEYS = frozenset(READING_ORDER)
PCIE_MAX_WIDTH = 16  # every simulated GPU is an x16 card
NOISY_READING_KEYS = frozenset({"power_w", "temperature_c", "memory_temperature_c"})


@dataclass(frozen=True)
class TimedFault:
    """A stored fault and when it began (SimFault rows carry the same fields)."""

    kind: str
    target: str
    parameters: dict
    since: float


@dataclass(frozen=True)
class TimedChange:
    """A command-made change that moves the GPUs (a power limit set with nvidia-smi -pl) and since when (SimChange
    rows carry the same fields; their `updated` time is the moment)."""

    key: str
    value: object
    since: float


@dataclass
class NodeHistory:
    """A node's healthy state, when it booted (its energy counters start there), its faults and the command-made
    changes to its GPUs, with their times."""

    healthy: SimulatedNode
    booted: float
    faults: list[TimedFault] = field(default_factory=list)
    changes: list[TimedChange] = field(default_factory=list)

    @property
    def hostname(self) -> str:
        return self.healthy.hostname


# --- the model --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuRegime:
    """One GPU while nothing changes: what it can do under load, and what its faults show."""

    present: bool
    load_mhz: int
    full_power_w: float
    reasons_busy: tuple[str, ...]
    thermal_c: int | None
    xid: int
    ecc_dbe: int
    remap_pending: bool
    remap_failure: bool
    pcie_gen: int  # the link's trained generation and width; a downtrained link shows below the card's maximum
    pcie_width: int
    power_limit_w: int


def gpu_regime(gpu: SimGpu, faults: list[tuple[str, str]]) -> GpuRegime:
    facts = gpu.facts
    limit = gpu.power_cap_w
    clock = float(min(facts.max_sm_mhz, gpu.clock_cap_mhz or facts.max_sm_mhz))
    reasons = []
    if gpu.clock_cap_mhz and gpu.clock_cap_mhz < facts.max_sm_mhz:
        reasons.append("applications_clocks_setting")
    if power_demand_w(1.0, clock) > limit:
        clock = clock_at_power_cap(1.0, limit)
        reasons.append("sw_power_cap")
    if gpu.thermal_c:
        clock = min(clock, THERMAL_SLOWDOWN_MHZ)
        reasons = [name for name in reasons if name != "sw_power_cap"]
        reasons += ["hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown"]
    index = str(gpu.index)
    xids = [XID_OF_FAULT[kind] for kind, target in faults if kind in XID_OF_FAULT and target == index]
    mhz = quantise_clock(clock)
    return GpuRegime(
        present=gpu.present,
        load_mhz=mhz,
        full_power_w=min(power_demand_w(1.0, mhz), float(limit)),
        reasons_busy=tuple(sorted(set(reasons), key=REASON_BITS.__getitem__)),
        thermal_c=gpu.thermal_c,
        xid=max(xids, default=0),
        ecc_dbe=gpu.ecc_uncorrectable,
        remap_pending=gpu.remap_pending,
        remap_failure=gpu.remap_failed,
        pcie_gen=gpu.link_gen,
        pcie_width=gpu.pcie_width,
        power_limit_w=limit,
    )


def nominal_mhz(gpu: SimGpu) -> float:
    """The clock a healthy card of this SKU holds under full load (its default power limit decides)."""
    clock = float(gpu.facts.max_sm_mhz)
    return clock_at_power_cap(1.0, gpu.tdp_w) if power_demand_w(1.0, clock) > gpu.tdp_w else clock


@dataclass(frozen=True)
class NodeRegime:
    gpus: tuple[tuple[SimGpu, GpuRegime], ...]
    speed: float  # of a healthy node: the slowest GPU's clock over the nominal; 0 when a GPU has gone
    # The OS hung (node_hang): its exporters answer nothing, so it has no samples at all (a target down), though its
    # GPUs still draw power. Powered off through its BMC: silent too, and its GPUs draw nothing.
    silent: bool = False

    def gpu(self, index: int) -> tuple[SimGpu, GpuRegime]:
        """The GPU with this index (indexes need not run 0..n-1: a card may be missing from the inventory)."""
        return next(pair for pair in self.gpus if pair[0].index == index)


def _sine_integral(mean: float, wave: float, omega: float, phase: float, a: float, b: float) -> float:
    """∫ mean + wave·sin(omega·t + phase) dt from a to b."""
    return mean * (b - a) - wave / omega * (math.cos(omega * b + phase) - math.cos(omega * a + phase))


def _clipped_sine_integral(mean: float, wave: float, cap: float, omega: float, phase: float, a: float, b: float):
    """∫ min(cap, mean + wave·sin(omega·t + phase)) dt from a to b, in closed form (crossings at arcsin)."""
    if cap >= mean + wave:
        return _sine_integral(mean, wave, omega, phase, a, b)
    if cap <= mean - wave:
        return cap * (b - a)
    alpha = math.asin((cap - mean) / wave)  # the wave is above the cap for θ in (alpha, π - alpha)

    def within_period(theta: float) -> float:  # ∫_0^theta of the clipped wave, theta in [0, 2π)
        def free(x0, x1):
            return mean * (x1 - x0) - wave * (math.cos(x1) - math.cos(x0))

        if theta <= alpha:
            return free(0.0, theta)
        top = math.pi - alpha
        if theta <= top:
            return free(0.0, alpha) + cap * (theta - alpha)
        return free(0.0, alpha) + cap * (top - alpha) + free(top, theta)

    period = within_period(2 * math.pi - 1e-12)

    def antiderivative(theta: float) -> float:
        turns, rest = divmod(theta, 2 * math.pi)
        return turns * period + within_period(rest)

    return (antiderivative(omega * b + phase) - antiderivative(omega * a + phase)) / omega


@functools.lru_cache(maxsize=4096)
def _phase(seed: int, *keys) -> float:
    return noise(seed, "phase", *keys).uniform(0, 2 * math.pi)


_LOG_BUCKETS = tuple(math.log(le) for le in LATENCY_BUCKETS)


def _lognormal_cdfs(median: float, sigma: float) -> list[float]:
    """The log-normal's CDF at each latency bucket's bound (the logs worked out once: this runs per model step)."""
    centre, scale = math.log(median), sigma * math.sqrt(2)
    return [0.5 * (1 + math.erf((log_le - centre) / scale)) for log_le in _LOG_BUCKETS]


def _modelled_power_w(regime: GpuRegime, terms) -> float:
    """Board power of a card on the bus: idle, or the static part plus the busy fraction of the dynamic part."""
    if terms is None:
        return IDLE_POWER_W
    return STATIC_POWER_W + terms[2] * (regime.full_power_w - STATIC_POWER_W)


def latency_factor(load: float) -> float:
    """How much slower requests get at a load (demand over capacity): flat, then steep, then a queue."""
    if load <= 1:
        return 1 + 2 * load**8
    return 3 + 10 * (load - 1)


class ClusterTelemetry:
    """The telemetry of a simulated cluster with its workloads; every method takes the time it is asked about."""

    def __init__(self, histories: list[NodeHistory], workloads: Workloads, *, seed: int = 0, ledger=None):
        self.seed = seed
        # What the simulated endpoints served (apps.simulator.serving.ServingLedger): added to the services' counters
        # and their GPUs' busy fraction. None: only the background demand.
        self.ledger = ledger
        self.histories = {history.hostname: history for history in histories}
        self.workloads = workloads
        self._regimes: dict = {}  # this model's: (hostname, which faults and changes are active) -> NodeRegime
        self._states: dict = {}  # the same keys -> the node's state with them applied (its NICs)
        self._capacities: dict = {}  # (service, piece between breakpoints) -> capacity: this model's workloads only
        self.breakpoints = sorted(
            {fault.since for history in histories for fault in history.faults}
            | {change.since for history in histories for change in history.changes}
            | {run.started for run in (*workloads.training, *workloads.serving)}
        )
        self._role = {}  # hostname -> the workload that loads its GPUs (training wins over serving)
        for run in workloads.serving:
            for hostname in run.hostnames:
                self._role[hostname] = run
        for run in workloads.training:
            for hostname in run.hostnames:
                self._role[hostname] = run

    # regimes

    def _key(self, hostname: str, t: float):
        history = self.histories[hostname]
        if not history.faults and not history.changes:
            return hostname  # the common case, asked for thousands of times by a page
        # Which of the history's faults and changes are active, by position (the history is this model's own)
        return (
            hostname,
            tuple(i for i, fault in enumerate(history.faults) if fault.since <= t),
            tuple(i for i, change in enumerate(history.changes) if change.since <= t),
        )

    def node_regime(self, hostname: str, t: float) -> NodeRegime:
        history = self.histories[hostname]
        key = self._key(hostname, t)
        if key not in self._regimes:
            active = tuple(fault for fault in history.faults if fault.since <= t)
            changed = tuple(change for change in history.changes if change.since <= t)
            state = apply_changes(apply_faults(copy.deepcopy(history.healthy), active), changed)
            self._states[key] = state
            gpus = tuple((gpu, gpu_regime(gpu, state.faults)) for gpu in state.gpus)
            if state.powered_off:  # off through its BMC: no GPU on a bus, nothing drawn, nothing scraped
                gpus = tuple((gpu, replace(regime, present=False)) for gpu, regime in gpus)
            speeds = [regime.load_mhz / nominal_mhz(gpu) if regime.present else 0.0 for gpu, regime in gpus]
            silent = state.os_hung or state.powered_off
            self._regimes[key] = NodeRegime(gpus, min(1.0, min(speeds, default=0.0)), silent=silent)
        return self._regimes[key]

    def nic_readings(self, hostname: str, t: float) -> list[dict]:
        """What node_exporter shows of the node's NICs at t: each NIC's name, RDMA device, whether its link is up,
        its link rate (the cable's trained rate: a degraded cable's lower one) and its receive counters since boot
        (frames, and the frames a degraded cable corrupted from its fault on, each also a symbol error)."""
        if self.node_regime(hostname, t).silent:  # works the state out once per set of active faults
            return []
        history, state = self.histories[hostname], self._states[self._key(hostname, t)]
        up_for = max(t - history.booted, 0.0)
        readings = []
        for nic in state.nics:
            corrupted = sum(
                (t - max(fault.since, history.booted)) * NIC_FRAMES_PER_S * fault.parameters.get("crc_per_million", 0)
                for fault in history.faults
                if fault.kind == "degraded_cable" and fault.target == nic.name and fault.since <= t
            )
            readings.append(
                {
                    "name": nic.name,
                    "rdma_device": nic.rdma_device,
                    "link_up": nic.link_up,
                    "speed_gbps": nic.effective_speed_gbps,
                    "rx_packets": int(up_for * NIC_FRAMES_PER_S),
                    "rx_errors": int(corrupted / 1e6),
                }
            )
        return readings

    def nvlink_readings(self, hostname: str, t: float) -> list[tuple[int, int, list[int]]]:
        """What the node's GPUs show of their NVLink links at t (`nvidia-smi nvlink -s`, dcgm-exporter's per-link
        state): (GPU index, its links, the links inactive) of each GPU on the bus. A switch tray down on another tray
        of the domain shows here too (the tray's state carries the domain's faults). Nothing from a silent node (its
        OS hung, its chassis off): its exporter answers nothing."""
        if self.node_regime(hostname, t).silent:  # works the state out once per set of active faults
            return []
        state = self._states[self._key(hostname, t)]
        return [
            (gpu.index, gpu.facts.nvlinks, sorted(gpu.nvlinks_down))
            for gpu in state.gpus
            if gpu.present and gpu.facts.nvlinks
        ]

    def imex_daemon_status(self, hostname: str, t: float) -> int | None:
        """The tray's IMEX daemon status at t as DCGM reads it (`nvidia-imex-ctl -q`): READY, or UNAVAILABLE where
        the domain lost this tray's daemon (an IMEX peer lost, injected on any tray of the domain); None outside a
        rack-scale domain (no IMEX installed) or from a silent node (nothing scraped)."""
        silent = self.node_regime(hostname, t).silent
        domain = self._states[self._key(hostname, t)].domain
        if domain is None or silent:
            return None
        return IMEX_UNAVAILABLE if hostname in domain.imex_lost else IMEX_READY

    def _segments(self, a: float, b: float) -> list[tuple[float, float]]:
        """[a, b] cut where a fault began or a workload started: within a piece nothing but the waves change."""
        cuts = [
            a,
            *self.breakpoints[bisect.bisect_right(self.breakpoints, a) : bisect.bisect_left(self.breakpoints, b)],
        ]
        return list(zip(cuts, [*cuts[1:], b], strict=True))

    def served_within(self, a: float, b: float) -> bool:
        """Whether the simulated endpoints served requests of the workloads' services in [a, b]."""
        if self.ledger is None:
            return False
        return any(self.ledger.seconds_within(run.name, a, b) for run in self.workloads.serving)

    def role(self, hostname: str, t: float):
        run = self._role.get(hostname)
        return run if run is not None and run.started <= t else None

    def job_speed(self, run: TrainingRun, t: float) -> float:
        return min(self.node_regime(hostname, t).speed for hostname in run.hostnames if hostname in self.histories)

    def service_capacity(self, run: ServingRun, t: float) -> float:
        """Of the design throughput: the speeds of the service's serving nodes over the nodes it is sized for (a
        service scaled in to half its nodes has half its capacity). Constant between two breakpoints (the nodes'
        regimes change only at a fault or a change), so worked out once a piece: a month's SLO windows ask it at
        every 10 s of their rate ranges."""
        key = (run.name, bisect.bisect_right(self.breakpoints, t))
        capacity = self._capacities.get(key)
        if capacity is None:
            speeds = [self.node_regime(hostname, t).speed for hostname in run.hostnames if hostname in self.histories]
            capacity = self._capacities[key] = sum(speeds) / max(len(speeds), run.sized_for) if speeds else 0.0
        return capacity

    def demand(self, run: ServingRun, t: float) -> float:
        """Of the design throughput: a daily wave, peaking at a seeded hour."""
        return DEMAND_MEAN + DEMAND_WAVE * math.sin(2 * math.pi * t / DAY + _phase(self.seed, run.name))

    # GPU busy fraction and power

    def _busy_terms(self, hostname: str, t: float):
        """(kind, integral function over [a, b] of the busy fraction, busy fraction at t, the busy fraction as a
        function of time) within t's segment."""
        run = self.role(hostname, t)
        if run is None:
            return None
        speed = self.node_regime(hostname, t).speed
        if speed <= 0:
            return None
        if isinstance(run, TrainingRun):
            share = self.job_speed(run, t) / speed  # waiting for the slowest node at every collective
            phase, omega = _phase(self.seed, run.name, "steps"), 2 * math.pi / TRAINING_PERIOD_S

            def integral(a, b):
                return share * _sine_integral(TRAINING_BUSY, TRAINING_WAVE, omega, phase, a, b)

            def at(x):
                return share * (TRAINING_BUSY + TRAINING_WAVE * math.sin(omega * x + phase))

            return "training", integral, at(t), at
        capacity = self.service_capacity(run, t)
        served = self.ledger.tokens_in_second(run.name, math.floor(t)) if self.ledger is not None else None
        if served is not None:  # the endpoint served requests in this second: on top of the background demand
            background = min(capacity, self.demand(run, t)) * run.design_tokens_per_second
            share = min(1.0, (background + served) / (capacity * run.design_tokens_per_second))
            return "serving", lambda a, b: share * (b - a), share, lambda x: share
        phase, omega = _phase(self.seed, run.name), 2 * math.pi / DAY

        def integral(a, b):
            return _clipped_sine_integral(DEMAND_MEAN, DEMAND_WAVE, capacity, omega, phase, a, b) / capacity

        def at(x):
            return min(capacity, DEMAND_MEAN + DEMAND_WAVE * math.sin(omega * x + phase)) / capacity

        return "serving", integral, at(t), at

    def busy(self, hostname: str, t: float) -> float:
        terms = self._busy_terms(hostname, t)
        return terms[2] if terms else 0.0

    def power_w(self, hostname: str, index: int, t: float) -> float:
        """The modelled board power (without the gauge's noise); 0 for a GPU off the bus."""
        gpu, regime = self.node_regime(hostname, t).gpu(index)
        return _modelled_power_w(regime, self._busy_terms(hostname, t)) if regime.present else 0.0

    def energy_j(self, hostname: str, index: int, a: float, b: float) -> float:
        """∫ power dt over [a, b], exactly."""
        total = 0.0
        for start, end in self._served_pieces(hostname, self._segments(a, b)):
            middle = (start + end) / 2
            gpu, regime = self.node_regime(hostname, middle).gpu(index)
            if not regime.present or end <= start:
                continue
            terms = self._busy_terms(hostname, middle)
            if terms is None:
                total += IDLE_POWER_W * (end - start)
            else:
                total += STATIC_POWER_W * (end - start) + (regime.full_power_w - STATIC_POWER_W) * terms[1](start, end)
        return total

    def _served_pieces(self, hostname: str, segments: list[tuple[float, float]]) -> list[tuple[float, float]]:
        """The segments cut again at the whole seconds in which the node's service served requests (within such a
        second its busy fraction is constant)."""
        run = self._role.get(hostname)
        if self.ledger is None or not isinstance(run, ServingRun):
            return segments
        pieces = []
        for start, end in segments:
            cuts = [start]
            for second in self.ledger.seconds_within(run.name, start, end):
                cuts += [x for x in (float(second), float(second + 1)) if start < x < end and x > cuts[-1]]
            pieces += list(zip(cuts, [*cuts[1:], end], strict=True))
        return pieces

    def sm_active_seconds(self, hostname: str, a: float, b: float) -> float:
        """∫ DCGM_FI_PROF_SM_ACTIVE dt over [a, b], exactly, for any GPU of the node (its GPUs share the load): the
        busy fraction's integral times the SM share of its kind of work. GPU-hours "busy, SM-active weighted"."""
        total = 0.0
        for start, end in self._served_pieces(hostname, self._segments(a, b)):
            if end <= start:
                continue
            terms = self._busy_terms(hostname, (start + end) / 2)
            if terms is not None:
                total += SM_ACTIVE_PER_BUSY[terms[0]] * terms[1](start, end)
        return total

    def _piece(self, hostname: str, t: float):
        """What holds from the last breakpoint at or before t to the next: the busy terms and each GPU's
        (index, on the bus, full power)."""
        terms = self._busy_terms(hostname, t)
        gpus = [(gpu.index, state.present, state.full_power_w) for gpu, state in self.node_regime(hostname, t).gpus]
        return terms, gpus

    def samples(self, hostname: str, times: list[float]):
        """(t, busy, sm_active, {gpu: energy counter in mJ}) at each of the increasing `times`, for the GPUs on the
        bus: the values gpu_reading gives, the counters carried forward from one time to the next (a month of 15 s
        samples costs one closed-form integral per step, not one from the node's boot); no counter while the node is
        silent (its OS hung: nothing is scraped). For backfilling a time-series store (bench/monitoring.py)."""
        if not times:
            return
        booted = self.histories[hostname].booted
        breakpoints = self.breakpoints
        pieces: dict[int, tuple] = {}

        def piece(x: float):
            key = bisect.bisect_right(breakpoints, x)
            if key not in pieces:
                pieces[key] = self._piece(hostname, x)
            return pieces[key]

        energy = {
            index: self.energy_j(hostname, index, booted, max(times[0], booted)) for index, _, _ in piece(times[0])[1]
        }

        def add(terms, gpus, a: float, b: float) -> None:
            integral = terms[1](a, b) if terms else 0.0
            for index, present, full_power in gpus:
                if present:
                    gained = (
                        IDLE_POWER_W * (b - a)
                        if terms is None
                        else (STATIC_POWER_W * (b - a) + (full_power - STATIC_POWER_W) * integral)
                    )
                    energy[index] = energy.get(index, 0.0) + gained

        previous = times[0]
        for t in times:
            low, high = max(previous, booted), max(t, booted)
            if high > low:
                if bisect.bisect_right(breakpoints, low) == bisect.bisect_left(breakpoints, high):
                    add(*piece((low + high) / 2), low, high)  # nothing changes in between: one piece
                else:
                    for start, end in self._segments(low, high):
                        add(*piece((start + end) / 2), start, end)
            previous = t
            terms, gpus = piece(t)
            # A piece's busy fraction as a function of time where it has one; else asked at t itself.
            busy = (terms[3](t) if len(terms) > 3 else self.busy(hostname, t)) if terms else 0.0
            kind = terms[0] if terms else "idle"
            yield (
                t,
                busy,
                round(busy * SM_ACTIVE_PER_BUSY.get(kind, 0.0), 6),
                {}
                if self.node_regime(hostname, t).silent
                else {index: int(energy[index] * 1000) for index, present, _ in gpus if present},
            )

    def energy_counter_mj(self, hostname: str, index: int, t: float) -> int:
        """DCGM's total energy since the driver loaded (the node's boot), in mJ."""
        booted = self.histories[hostname].booted
        return int(self.energy_j(hostname, index, booted, max(t, booted)) * 1000)

    def nvlink_crc_errors(self, hostname: str, index: int, t: float) -> int:
        history = self.histories[hostname]
        seconds = sum(
            t - fault.since
            for fault in history.faults
            if fault.kind == "nvlink_down" and fault.target == str(index) and fault.since <= t
        )
        return int(seconds * NVLINK_CRC_ERRORS_PER_S)

    def _card_offset(self, hostname: str, index: int) -> float:
        """Cards differ by a few degrees in the same chassis."""
        key = (hostname, "card", index)
        if key not in self._regimes:
            self._regimes[key] = noise(self.seed, "card", hostname, index).uniform(-3, 3)
        return self._regimes[key]

    def gpu_reading(self, hostname: str, index: int, t: float, *, counters: bool = True) -> dict | None:
        """The gauges dcgm-exporter shows for one GPU at t (seeded noise on top of the model); None: off the bus.
        Without `counters` the energy and NVLink error counters are left out (they cost the most to work out)."""
        gpu, regime = self.node_regime(hostname, t).gpu(index)
        return self._reading(hostname, gpu, regime, self._busy_terms(hostname, t), t, counters=counters)

    def node_readings(self, hostname: str, t: float, *, keys: frozenset[str]) -> list[tuple[int, dict | None]]:
        """(index, reading) of each GPU of the node at t with only these keys (a page's batch: the node's load is
        worked out once for all its GPUs, and the seeded noise only for the keys that carry it). The values are
        gpu_reading's. None at all while the node is silent (its OS hung): no series, as a target down shows."""
        if self.node_regime(hostname, t).silent:
            return []
        terms = self._busy_terms(hostname, t)
        return [
            (gpu.index, self._reading(hostname, gpu, regime, terms, t, keys=keys))
            for gpu, regime in self.node_regime(hostname, t).gpus
        ]

    def _reading(self, hostname, gpu, regime, terms, t, *, counters=False, keys=None) -> dict | None:
        """One GPU's gauges at t from its regime and its node's busy terms; `keys` limits what is worked out."""
        if not regime.present:
            return None
        kind, busy = (terms[0], terms[2]) if terms else ("idle", 0.0)
        index = gpu.index
        wanted = ALL_READING_KEYS if keys is None else keys
        working = busy > 0.01
        values = {}
        if wanted & NOISY_READING_KEYS:
            rng = noise(self.seed, "dcgm", hostname, index, int(t))
            offset = self._card_offset(hostname, index)
            power = _modelled_power_w(regime, terms) * (1 + rng.uniform(-0.004, 0.004))
            thermal = regime.thermal_c
            temperature = thermal + rng.uniform(-1, 1) if thermal else 33 + 0.034 * power + offset
            values["power_w"] = round(power, 3)
            values["temperature_c"] = int(round(temperature))
            values["memory_temperature_c"] = int(round(33 + 0.02 * power + offset / 2))
        if "reasons" in wanted:
            reasons = regime.reasons_busy if working else ("gpu_idle",)
            if regime.thermal_c and not working:
                reasons = ("gpu_idle", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown")
            values["reasons"] = sum(REASON_BITS[name] for name in reasons)
        if wanted & {"fb_used_mib", "fb_free_mib"}:
            fb_total = gpu.facts.memory_mib
            fb_used = int(fb_total * FB_USED_SHARE.get(kind, 0.0)) if kind != "idle" else 1
            values["fb_used_mib"], values["fb_free_mib"] = fb_used, fb_total - fb_used
        values |= {
            "util": int(round(100 * busy)),
            "sm_active": round(busy * SM_ACTIVE_PER_BUSY.get(kind, 0.0), 6),
            "dram_active": round(busy * DRAM_ACTIVE_PER_BUSY.get(kind, 0.0), 6),
            "sm_mhz": regime.load_mhz if working else gpu.facts.idle_sm_mhz,
            "mem_mhz": gpu.facts.memory_mhz,
            "power_limit_w": regime.power_limit_w,
            "xid": regime.xid,
            "ecc_dbe": regime.ecc_dbe,
            "remap_pending": int(regime.remap_pending),
            "remap_failure": int(regime.remap_failure),
            "pcie_gen": regime.pcie_gen,
            "pcie_width": regime.pcie_width,
            "pcie_max_gen": gpu.pcie_gen_max,
            "pcie_max_width": PCIE_MAX_WIDTH,
        }
        if keys is not None:
            return {key: values[key] for key in keys}
        values["energy_mj"] = self.energy_counter_mj(hostname, index, t) if counters else None
        values["nvlink_crc_errors"] = self.nvlink_crc_errors(hostname, index, t) if counters else None
        return {key: values[key] for key in READING_ORDER}

    # inference services

    def service(self, name: str) -> ServingRun:
        return next(run for run in self.workloads.serving if run.name == name)

    def restarted(self, run: ServingRun, t: float) -> float:
        """When the service's process last started: its start, then once a day at a seeded second."""
        offset = noise(self.seed, "restart", run.name).uniform(0, DAY)
        daily = math.floor((t - offset) / DAY) * DAY + offset
        return max(run.started, daily)

    def service_rates(self, run: ServingRun, t: float) -> dict:
        """Rates at t: generated tokens/s, requests/s, and the medians of the latency distributions."""
        if t < run.started:
            return {"tokens": 0.0, "requests": 0.0, "e2e_median": E2E_MEDIAN_S, "ttft_median": TTFT_MEDIAN_S, "load": 0}
        capacity = self.service_capacity(run, t)
        demand = self.demand(run, t)
        load = demand / capacity if capacity > 0 else math.inf
        tokens = min(capacity, demand) * run.design_tokens_per_second
        factor = latency_factor(load) if capacity > 0 else 1.0
        return {
            "tokens": tokens,
            "requests": tokens / OUTPUT_TOKENS_PER_REQUEST,
            "e2e_median": E2E_MEDIAN_S * factor,
            "ttft_median": TTFT_MEDIAN_S * factor,
            "load": load,
        }

    def _service_step(self, run: ServingRun, t: float) -> list[float]:
        """Per second at t: generated tokens, requests, e2e sum, ttft sum, then e2e and ttft bucket counts."""
        rates = self.service_rates(run, t)
        requests = rates["requests"]
        e2e_mean = rates["e2e_median"] * math.exp(E2E_SIGMA**2 / 2)
        ttft_mean = rates["ttft_median"] * math.exp(TTFT_SIGMA**2 / 2)
        row = [rates["tokens"], requests, requests * e2e_mean, requests * ttft_mean]
        row += [requests * share for share in _lognormal_cdfs(rates["e2e_median"], E2E_SIGMA)]
        row += [requests * share for share in _lognormal_cdfs(rates["ttft_median"], TTFT_SIGMA)]
        return row

    def service_totals(self, run: ServingRun, a: float, b: float, step: float = INTEGRATION_STEP_S) -> list[float]:
        """What the service served over [a, b]: the background demand's integral, plus what its endpoint served."""
        totals = self._demand_totals(run, a, b, step)
        return [x + y for x, y in zip(totals, self._served(run, a, b), strict=True)]

    def _served(self, run: ServingRun, a: float, b: float) -> list[float]:
        width = 4 + 2 * len(LATENCY_BUCKETS)
        if self.ledger is None or b <= a:
            return [0.0] * width
        return self.ledger.window_sum(run.name, a, b)[:width]

    def served_tokens(self, run: ServingRun, a: float, b: float) -> float:
        """Tokens the endpoint generated over [a, b]."""
        return self._served(run, a, b)[0]

    def served_prompt_tokens(self, run: ServingRun, t: float) -> float:
        """Prompt tokens the endpoint processed since the process last started."""
        if self.ledger is None:
            return 0.0
        return self.ledger.window_sum(run.name, self.restarted(run, t), t)[-1]

    def _demand_totals(self, run: ServingRun, a: float, b: float, step: float = INTEGRATION_STEP_S) -> list[float]:
        """∫ of _service_step over [a, b] (midpoint rule on a grid aligned to whole steps)."""
        totals = [0.0] * (4 + 2 * len(LATENCY_BUCKETS))
        if b <= a:
            return totals
        edges = [a, *[k * step for k in range(math.floor(a / step) + 1, math.ceil(b / step))], b]
        for start, end in zip(edges, edges[1:], strict=False):
            row = self._service_step(run, (start + end) / 2)
            for column, value in enumerate(row):
                totals[column] += value * (end - start)
        return totals

    def service_tokens(self, run: ServingRun, a: float, b: float, step: float = INTEGRATION_STEP_S) -> float:
        """service_totals' first column alone (generated tokens over [a, b]), without the latency histograms."""
        if b <= a:
            return 0.0
        edges = [a, *[k * step for k in range(math.floor(a / step) + 1, math.ceil(b / step))], b]
        return sum(
            self.service_rates(run, (start + end) / 2)["tokens"] * (end - start)
            for start, end in zip(edges, edges[1:], strict=False)
        )

    def service_counters(self, run: ServingRun, t: float) -> list[float]:
        """The counters since the process started, as its /metrics shows them at t (cached on a grid)."""
        start = self.restarted(run, t)
        faults = tuple(
            (fault.kind, fault.target, str(fault.parameters), fault.since)
            for hostname in run.hostnames
            for fault in getattr(self.histories.get(hostname), "faults", ())
        ) + tuple(
            (hostname, change.key, str(change.value), change.since)
            for hostname in run.hostnames
            for change in getattr(self.histories.get(hostname), "changes", ())
        )
        key = (self.seed, run, start, faults)  # shared by the models rebuilt every few seconds
        if key not in _SERVICE_GRIDS and len(_SERVICE_GRIDS) > 64:
            _SERVICE_GRIDS.clear()
        grid = _SERVICE_GRIDS.setdefault(key, {"until": start, "totals": None})
        boundary = math.floor(t / INTEGRATION_STEP_S) * INTEGRATION_STEP_S
        if grid["totals"] is None or boundary < grid["until"]:
            grid["until"], grid["totals"] = start, self._demand_totals(run, start, start)
        if boundary > grid["until"]:
            more = self._demand_totals(run, grid["until"], boundary)
            grid["totals"] = [x + y for x, y in zip(grid["totals"], more, strict=True)]
            grid["until"] = boundary
        rest = self._demand_totals(run, grid["until"], t)
        served = self._served(run, start, t)
        return [x + y + z for x, y, z in zip(grid["totals"], rest, served, strict=True)]

    def service_gauges(self, run: ServingRun, t: float) -> dict:
        rates = self.service_rates(run, t)
        running = rates["requests"] * rates["e2e_median"]  # Little's law
        if self.ledger is not None:
            running += self.ledger.in_flight.get(run.name, 0)  # the endpoint's own streams
        overload = max(0.0, rates["load"] - 1) if math.isfinite(rates["load"]) else 1.0
        waiting = rates["requests"] * overload * 2 if rates["load"] != math.inf else 50 * self.demand(run, t)
        return {"running": round(running), "waiting": round(waiting)}
