"""Runbook 2, GPU utilisation fluctuating, as pure functions: the utilisation series of a job's GPUs, what it shows
(periodic dips: their period and depth; which GPUs the fleet waits for; why their clocks are held), what the
scheduler's records show on the nodes behind, how that ranks the causes, and the fix.

No database here: the kind (apps/diagnosis/kinds/gpu_utilisation.py) hands in the commands' output and plain facts. The
graph of checks:

1. on every node of the job: `nvidia-smi --query-gpu=timestamp,index,utilization.gpu,clocks.sm,
   clocks_event_reasons.active,power.draw,power.limit,power.default_limit,temperature.gpu --format=csv,nounits -lms`
   for the runbook's window (`sample_seconds`, WINDOW_S by default) → per GPU: mean utilisation, loaded SM clock,
   dips (autocorrelation), clocks-event reasons;
2. across the fleet: the GPUs busier than the median by LAG_POINTS or slower-clocked than it by CLOCK_LAG (every
   other rank waits for them at each all-reduce), and whether every GPU dips with one period;
3. a reason that holds a lagging GPU's clocks → power cap (a limit below the default) / thermal or HW slowdown /
   application clocks, with the node and GPU; no reason but a node behind → the scheduler's records on it
   (`kubectl get pods -A -o wide`): a second trainer there → the scheduler fix (pod anti-affinity and the scheduler
   profile, regenerated for the job's nodes); dips on every GPU with no reason → the data loader.
"""

import statistics
from dataclasses import dataclass, field
from datetime import datetime

from apps.core.text import counted
from apps.diagnosis.choices import Cause, EvidenceVerdict
from apps.diagnosis.runbook import FixCommand, Observation, Read
from apps.parsers.kubernetes import parse_get_pods
from apps.parsers.nvidia_smi import QUERY_TIMESTAMP, parse_query_gpu
from apps.parsers.slurm import parse_show_job

# The sampling window: a loader period shows as periodic only when the window holds at least MIN_PERIODS of it, so
# the default catches periods up to 20 s; the bounds keep a run short enough to wait for and long enough to judge.
WINDOW_S = 60
MIN_WINDOW_S, MAX_WINDOW_S = 10, 600
MIN_PERIODS = 3
INTERVAL_MS = 200
MIN_SAMPLES = 10  # per GPU, for a period or a median to mean something
LOADED_PCT = 30  # a sample below this utilisation is a wait, not the GPU's working clock
LAG_POINTS = 10  # a GPU this much busier than the fleet's median is the one the others wait for
CLOCK_LAG = 0.9  # or one whose loaded SM clock is below this share of the fleet's median
DIP_DEPTH = 20  # points between a GPU's 95th and 5th percentiles: a dip, not noise (±2 points)
DIP_CORRELATION = 0.5  # the autocorrelation at the period: the dips repeat
ACTIVE_SHARE = 0.5  # a clocks-event reason held in this share of the loaded samples holds the clock
SYSTEM_NAMESPACES = ("kube-system", "gpu-operator", "nvidia-gpu-operator", "network-operator", "monitoring")
# Reason groups (decoded names of nvmlClocksEventReasons) and the topic of their evidence.
THERMAL = ("sw_thermal_slowdown", "hw_thermal_slowdown")
HW_SLOWDOWN = ("hw_slowdown", "hw_power_brake_slowdown")
THROTTLE_TOPICS = ("power_cap", "thermal", "hw_slowdown", "clocks_capped")


def series_read(seconds: int = WINDOW_S) -> Read:
    return Read("series", "utilisation-series", (("seconds", seconds), ("interval_ms", INTERVAL_MS)))


def pods_read() -> Read:
    return Read("pods", "kubectl-get-pods")


def slurm_jobs_read() -> Read:
    return Read("slurm-jobs", "scontrol-show-jobs")


# --- one GPU's series ---------------------------------------------------------------------------------------------


@dataclass
class GpuSeries:
    index: int
    times: list[float] = field(default_factory=list)  # seconds since the first sample
    util: list[float] = field(default_factory=list)
    sm_mhz: list[float] = field(default_factory=list)
    reasons: list[tuple[str, ...]] = field(default_factory=list)
    power_limit_w: float | None = None
    default_limit_w: float | None = None
    temperature_c: float | None = None  # the hottest sample


def _seconds(stamp: str | None) -> float | None:
    if not stamp or not QUERY_TIMESTAMP.match(stamp):
        return None
    return datetime.strptime(stamp if "." in stamp else stamp + ".0", "%Y/%m/%d %H:%M:%S.%f").timestamp()


def read_series(text: str) -> dict[int, GpuSeries]:
    """GPU index -> its samples, from the sampler's CSV (the lines after the script's marker, or the whole text)."""
    marker = text.find("@@rackpilot nvidia-smi samples")
    body = text[text.index("\n", marker) + 1 :] if marker >= 0 else text
    report = parse_query_gpu(body)
    found: dict[int, GpuSeries] = {}
    first = None
    for row in report.gpus:
        if row.index is None or row.utilization_gpu_pct is None:
            continue
        at = _seconds(row.timestamp)
        first = at if first is None else first
        gpu = found.setdefault(row.index, GpuSeries(row.index))
        gpu.times.append(round(at - first, 3) if at is not None else len(gpu.times) * INTERVAL_MS / 1000)
        gpu.util.append(row.utilization_gpu_pct)
        gpu.sm_mhz.append(row.clocks_sm_mhz or 0.0)
        gpu.reasons.append(tuple(row.clocks_event_reasons or ()))
        gpu.power_limit_w = row.power_limit_w if row.power_limit_w is not None else gpu.power_limit_w
        default = _number(row.extra.get("power.default_limit"))
        gpu.default_limit_w = default if default is not None else gpu.default_limit_w
        if row.temperature_c is not None:
            gpu.temperature_c = max(gpu.temperature_c or row.temperature_c, row.temperature_c)
    return found


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


def autocorrelation(values: list[float], lag: int) -> float:
    """The series' correlation with itself `lag` samples later (0 for a flat series)."""
    mean = statistics.fmean(values)
    deviations = [value - mean for value in values]
    power = sum(d * d for d in deviations)
    if power == 0 or lag >= len(values):
        return 0.0
    return sum(deviations[i] * deviations[i + lag] for i in range(len(values) - lag)) / power


@dataclass(frozen=True)
class Dips:
    depth: float  # points between the 95th and the 5th percentile (a stall may hold most samples, or few)
    period_s: float | None  # the repeat, where the dips repeat
    share: float  # of the samples more than depth/2 below the 95th percentile: how long the GPU waits
    correlation: float

    @property
    def periodic(self) -> bool:
        return self.depth >= DIP_DEPTH and self.period_s is not None


def dips(util: list[float], interval_s: float) -> Dips:
    """Depth of the dips and their period: the first local maximum of the autocorrelation above DIP_CORRELATION
    (at least two samples on, so the noise of neighbours does not count), for periods the window holds at least
    MIN_PERIODS times."""
    if len(util) < MIN_SAMPLES:
        return Dips(0.0, None, 0.0, 0.0)
    ordered = sorted(util)
    working = ordered[len(ordered) * 19 // 20]  # how busy the GPU is when it is fed
    depth = working - ordered[len(ordered) // 20]
    share = sum(1 for value in util if value < working - depth / 2) / len(util)
    if depth < DIP_DEPTH:
        return Dips(depth, None, share, 0.0)
    correlations = [autocorrelation(util, lag) for lag in range(len(util) // MIN_PERIODS + 2)]
    for lag in range(2, len(correlations) - 1):
        here = correlations[lag]
        if here >= DIP_CORRELATION and here >= correlations[lag - 1] and here >= correlations[lag + 1]:
            return Dips(depth, round(lag * interval_s, 2), share, round(here, 3))
    return Dips(depth, None, share, 0.0)


def held_by(gpu: GpuSeries) -> dict[str, list[str]]:
    """Topic -> the decoded reasons holding the GPU's clock in most of its loaded samples. A power cap counts only
    below the default limit: a card at its default limit under a full load is meant to sit at it."""
    loaded = [reasons for util, reasons in zip(gpu.util, gpu.reasons, strict=True) if util >= LOADED_PCT]
    if not loaded:
        return {}

    def held(names: tuple[str, ...]) -> list[str]:
        return [name for name in names if sum(name in reasons for reasons in loaded) >= ACTIVE_SHARE * len(loaded)]

    found = {}
    lowered = gpu.power_limit_w is not None and gpu.default_limit_w is not None
    if (cap := held(("sw_power_cap",))) and lowered and gpu.power_limit_w < gpu.default_limit_w:
        found["power_cap"] = cap
    if thermal := held(THERMAL):
        found["thermal"] = thermal + held(("hw_slowdown",))
    elif slowdown := held(HW_SLOWDOWN):
        found["hw_slowdown"] = slowdown
    if clocks := held(("applications_clocks_setting",)):
        found["clocks_capped"] = clocks
    return found


def summary(gpu: GpuSeries) -> dict:
    """What the fleet comparison needs of one GPU (kept in the evidence's data)."""
    interval = (gpu.times[-1] / (len(gpu.times) - 1)) if len(gpu.times) > 1 and gpu.times[-1] else INTERVAL_MS / 1000
    loaded = [mhz for util, mhz in zip(gpu.util, gpu.sm_mhz, strict=True) if util >= LOADED_PCT]
    found = dips(gpu.util, interval)
    return {
        "index": gpu.index,
        "samples": len(gpu.util),
        "mean": round(statistics.fmean(gpu.util), 1) if gpu.util else 0.0,
        "clock": round(statistics.median(loaded)) if loaded else 0,
        "depth": round(found.depth, 1),
        "period_s": found.period_s,
        "dip_share": round(found.share, 3),
        "periodic": found.periodic,
        "held": held_by(gpu),
        "power_limit_w": gpu.power_limit_w,
        "default_limit_w": gpu.default_limit_w,
        "temperature_c": gpu.temperature_c,
    }


# --- one node -----------------------------------------------------------------------------------------------------

TOPIC_WORDS = {
    "power_cap": "power-capped",
    "thermal": "in thermal slowdown",
    "hw_slowdown": "in HW slowdown (power brake or an external signal)",
    "clocks_capped": "held by application clocks",
}


def judge_series(hostname: str, ok: bool, text: str, command: str, seconds: int = WINDOW_S) -> list[Observation]:
    """The node's GPUs over the sampling window (`seconds`): one 'series' row with every GPU's summary, one row per
    GPU whose clock a reason holds (or one 'throttle' row saying none does)."""
    if not ok:
        return [
            Observation(
                "series", "", EvidenceVerdict.COULD_NOT_RUN, f"could not run: {text[-200:]}", command, "", hostname
            )
        ]
    try:
        gpus = read_series(text)
    except ValueError as error:  # ParseError is a ValueError
        return [
            Observation(
                "series", "", EvidenceVerdict.COULD_NOT_RUN, f"unreadable samples: {error}", command, "", hostname
            )
        ]
    summaries = [summary(gpu) for gpu in sorted(gpus.values(), key=lambda gpu: gpu.index)]
    if not summaries or min(item["samples"] for item in summaries) < MIN_SAMPLES:
        count = min((item["samples"] for item in summaries), default=0)
        return [
            Observation(
                "series", "", EvidenceVerdict.COULD_NOT_RUN, f"only {counted(count, 'sample')} per GPU", command
            )
        ]
    means = [item["mean"] for item in summaries]
    found = [
        Observation(
            "series",
            f"{len(summaries)} GPUs",
            EvidenceVerdict.INFO,
            f"{summaries[0]['samples']} samples per GPU over {seconds} s: utilisation {min(means):.0f}-"
            f"{max(means):.0f}% (mean per GPU), loaded SM clocks {_span([item['clock'] for item in summaries])} MHz",
            command,
            _lines(text, 6),
            hostname,
            {"gpus": summaries, "window_s": seconds},
        )
    ]
    for item in summaries:
        for topic, reasons in item["held"].items():
            limits = (
                f"; power limit {item['power_limit_w']:.0f} W, default {item['default_limit_w']:.0f} W"
                if topic == "power_cap"
                else (f"; up to {item['temperature_c']:.0f} °C" if topic == "thermal" else "")
            )
            found.append(
                Observation(
                    topic,
                    f"GPU {item['index']}",
                    EvidenceVerdict.FAULT,
                    f"GPU {item['index']} {TOPIC_WORDS[topic]}: {', '.join(reasons)} active under load, SM clock "
                    f"{item['clock']} MHz{limits}",
                    command,
                    "",
                    hostname,
                    {"gpu": item["index"], "reasons": reasons, "clock": item["clock"]},
                )
            )
    if len(found) == 1:
        found.append(
            Observation(
                "throttle",
                "",
                EvidenceVerdict.HEALTHY,
                "no clocks-event reason holds a GPU's clock under load (a power cap at the default limit is normal)",
                command,
                hostname=hostname,
            )
        )
    return found


def _span(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.0f}" if low == high else f"{low:.0f}-{high:.0f}"


def _lines(text: str, count: int) -> str:
    rows = [line for line in text.splitlines() if line and not line.startswith("@@")]
    return "\n".join(rows[:count])


# --- the fleet ----------------------------------------------------------------------------------------------------


def fleet(series_rows: list[tuple[str, list[dict]]]) -> list[Observation]:
    """Across the job's GPUs (hostname, its GPUs' summaries): who the others wait for ('lag'), and whether every GPU
    dips with one period ('dips')."""
    gpus = [(host, item) for host, items in series_rows for item in items]
    if not gpus:
        return []
    where = "(the series of every node of the job, compared)"
    median_util = statistics.median(item["mean"] for _, item in gpus)
    clocks = [item["clock"] for _, item in gpus if item["clock"]]
    median_clock = statistics.median(clocks) if clocks else 0
    behind = [
        (host, item)
        for host, item in gpus
        if item["mean"] >= median_util + LAG_POINTS or (item["clock"] and item["clock"] < CLOCK_LAG * median_clock)
    ]
    found = []
    if behind and len(behind) < len(gpus):
        hosts = sorted({host for host, _ in behind})
        places = "; ".join(
            f"{host} GPUs {', '.join(str(item['index']) for h, item in behind if h == host)}" for host in hosts
        )
        found.append(
            Observation(
                "lag",
                ", ".join(hosts)[:64],
                EvidenceVerdict.FAULT,
                f"{places} behind the fleet: busy {_span([item['mean'] for _, item in behind])}% at "
                f"{_span([item['clock'] for _, item in behind])} MHz while the median GPU is {median_util:.0f}% "
                f"busy at {median_clock:.0f} MHz (the other ranks wait for them at every all-reduce)",
                where,
                hostname=hosts[0] if len(hosts) == 1 else "",
                data={
                    "hosts": hosts,
                    "gpus": [[host, item["index"]] for host, item in behind],
                    "median_util": median_util,
                    "median_clock": median_clock,
                },
            )
        )
    else:
        found.append(
            Observation(
                "lag",
                "",
                EvidenceVerdict.HEALTHY,
                f"no GPU behind the fleet: utilisation {_span([item['mean'] for _, item in gpus])}%, loaded clocks "
                f"{_span(clocks or [0])} MHz",
                where,
                data={"median_util": median_util, "median_clock": median_clock},
            )
        )
    periodic = [item for _, item in gpus if item["periodic"]]
    if periodic and len(periodic) == len(gpus):
        periods = [item["period_s"] for item in periodic]
        period = statistics.median(periods)
        depth = statistics.median(item["depth"] for item in periodic)
        share = statistics.median(item["dip_share"] for item in periodic)
        found.append(
            Observation(
                "dips",
                f"{len(gpus)} GPUs",
                EvidenceVerdict.FAULT,
                f"every GPU of the job dips together: about every {period:.1f} s, {depth:.0f} points deep, idle "
                f"{100 * share:.0f}% of the time",
                where,
                data={"period_s": period, "depth": depth, "share": share, "gpus": len(gpus)},
            )
        )
    else:
        some = f"; {len(periodic)} of {len(gpus)} GPUs dip" if periodic else ""
        found.append(
            Observation(
                "dips",
                "",
                EvidenceVerdict.HEALTHY if not periodic else EvidenceVerdict.INFO,
                f"no periodic dip on every GPU{some}",
                where,
                data={"periodic": len(periodic), "gpus": len(gpus)},
            )
        )
    return found


def behind_hosts(observations: list[Observation]) -> list[str]:
    return next((seen.data["hosts"] for seen in observations if seen.check == "lag" and seen.data.get("hosts")), [])


# --- the scheduler's records --------------------------------------------------------------------------------------


def judge_pods(hosts: list[str], job_pod_prefix: str, ok: bool, text: str, command: str) -> list[Observation]:
    """On each node behind: the pods there other than the system DaemonSets. The job's own trainer and any other
    workload beside it: two trainers on one node share its CPUs, PCIe switches and NICs."""
    if not ok:
        return [Observation("placement", "", EvidenceVerdict.COULD_NOT_RUN, f"could not run: {text[-200:]}", command)]
    try:
        listing = parse_get_pods(text or "No resources found")
    except ValueError as error:
        return [Observation("placement", "", EvidenceVerdict.COULD_NOT_RUN, f"unreadable: {error}", command)]
    found = []
    lines = text.splitlines()
    for host in hosts:
        workloads = [
            pod
            for pod in listing.on_node(host)
            if pod.namespace not in SYSTEM_NAMESPACES and pod.status in ("Running", "Pending", "ContainerCreating")
        ]
        ours = [pod for pod in workloads if pod.name.startswith(job_pod_prefix)]
        others = [pod for pod in workloads if pod not in ours]
        if others:
            found.append(
                Observation(
                    "placement",
                    others[0].name[:64],
                    EvidenceVerdict.FAULT,
                    f"{len(ours) + len(others)} trainers on {host}: "
                    f"{', '.join(f'{pod.namespace}/{pod.name}' for pod in ours + others)} — no pod anti-affinity "
                    "kept them apart",
                    command,
                    "\n".join([lines[0], *(lines[pod.line - 1] for pod in ours + others)]),
                    host,
                    {"pods": [pod.name for pod in ours + others], "others": [pod.name for pod in others]},
                )
            )
        else:
            found.append(
                Observation(
                    "placement",
                    "",
                    EvidenceVerdict.HEALTHY,
                    f"only the job's pod{'s' if len(ours) != 1 else ''} on {host} "
                    f"({', '.join(pod.name for pod in ours) or 'none listed'}) besides the system DaemonSets",
                    command,
                    hostname=host,
                    data={"pods": [pod.name for pod in ours]},
                )
            )
    return found


def judge_slurm_jobs(hosts: list[str], job_name: str, ok: bool, text: str, command: str) -> list[Observation]:
    """On each node behind: the Slurm jobs holding part of it besides the training job (named `job_name`), with
    the CPUs and GPUs each one is bound to there, and whether the job was submitted with --exclusive."""
    if not ok:
        return [Observation("placement", "", EvidenceVerdict.COULD_NOT_RUN, f"could not run: {text[-200:]}", command)]
    try:
        listing = parse_show_job(text)
    except ValueError as error:
        return [Observation("placement", "", EvidenceVerdict.COULD_NOT_RUN, f"unreadable: {error}", command)]
    ours = [job for job in listing.named(job_name) if job.state in ("RUNNING", "SUSPENDED")]
    if not ours:
        return [
            Observation(
                "placement",
                "",
                EvidenceVerdict.COULD_NOT_RUN,
                f"no running Slurm job named {job_name} in the controller's listing",
                command,
            )
        ]
    job = ours[0]
    lines = text.splitlines()
    found = []
    for host in hosts:
        others = [other for other in listing.on_node(host) if other is not job and other.state == "RUNNING"]
        mine = job.on(host)
        held = f"CPUs {mine.cpu_ids}, GPUs {_gpus(mine.gpus)}" if mine else "its share"
        if others:
            beside = "; ".join(
                f"job {other.job_id} ({other.name}, user {other.user}) holds "
                + (f"CPUs {alloc.cpu_ids}, GPUs {_gpus(alloc.gpus)}" if (alloc := other.on(host)) else "part of it")
                for other in others
            )
            cited = [job.line, *(other.line for other in others)]
            cited += [alloc.line for alloc in (mine, *(other.on(host) for other in others)) if alloc]
            found.append(
                Observation(
                    "placement",
                    f"job {others[0].job_id}"[:64],
                    EvidenceVerdict.FAULT,
                    f"{1 + len(others)} jobs on {host}: job {job.job_id} ({job.name}) holds {held}; {beside} — "
                    f"job {job.job_id} has OverSubscribe={job.oversubscribe or '?'} (--exclusive not set), so Slurm "
                    "shares its nodes",
                    command,
                    "\n".join(lines[number - 1] for number in sorted(set(cited))),
                    host,
                    {
                        "slurm_job": job.job_id,
                        "jobs": [job.name, *(other.name for other in others)],
                        "others": [
                            {"job_id": other.job_id, "name": other.name, "user": other.user} for other in others
                        ],
                        "exclusive": job.exclusive,
                    },
                )
            )
        else:
            found.append(
                Observation(
                    "placement",
                    "",
                    EvidenceVerdict.HEALTHY,
                    f"only job {job.job_id} ({job.name}) on {host}: {held}",
                    command,
                    hostname=host,
                    data={"slurm_job": job.job_id, "exclusive": job.exclusive},
                )
            )
    return found


def slurm_artefact(observations: list[Observation], controller: str) -> str:
    """The Slurm fix, shown before a person runs it on the controller: the job back to the queue held, made
    exclusive, released (it restarts on whole nodes and resumes from its newest checkpoint), and the batch option
    that keeps a resubmission exclusive."""
    placed = [seen for seen in observations if seen.check == "placement" and seen.verdict == EvidenceVerdict.FAULT]
    job = placed[0].data["slurm_job"]
    beside = sorted(
        {
            f"job {other['job_id']} ({other['name']}) on {seen.hostname}"
            for seen in placed
            for other in seen.data["others"]
        }
    )
    return "\n".join(
        [
            f"# Slurm job {job} shares its nodes ({'; '.join(beside)}): it was not submitted with --exclusive.",
            f"# On the controller ({controller or 'the Slurm controller'}), once approved: requeue it held, make it",
            "# exclusive, release it; it starts again on nodes no other job shares and resumes from its checkpoint.",
            f"scontrol requeuehold {job}",
            f"scontrol update JobId={job} OverSubscribe=NO",
            f"scontrol release {job}",
            "# In the job's batch script, so that a resubmission keeps whole nodes:",
            "#SBATCH --exclusive",
        ]
    )


def _gpus(indices: list[int]) -> str:
    return ",".join(str(index) for index in indices) or "none"


# --- ranking ------------------------------------------------------------------------------------------------------

THROTTLE_CAUSES = (Cause.GPU_POWER_CAPPED, Cause.GPU_THERMAL, Cause.GPU_CLOCKS_CAPPED)
# A healthy GPU does not speak against another's throttle (one card is capped, seven are fine), so a clean 'throttle'
# row weighs nothing; a fleet with no GPU behind weakly speaks against a second trainer on a node.
WEIGHTS: dict[tuple[str, str], dict[str, int]] = {
    ("power_cap", EvidenceVerdict.FAULT): {Cause.GPU_POWER_CAPPED: 10},
    ("thermal", EvidenceVerdict.FAULT): {Cause.GPU_THERMAL: 10},
    ("hw_slowdown", EvidenceVerdict.FAULT): {Cause.GPU_THERMAL: 8},
    ("clocks_capped", EvidenceVerdict.FAULT): {Cause.GPU_CLOCKS_CAPPED: 10},
    ("lag", EvidenceVerdict.FAULT): {Cause.CO_LOCATED_TRAINER: 2, **dict.fromkeys(THROTTLE_CAUSES, 1)},
    ("lag", EvidenceVerdict.HEALTHY): {Cause.CO_LOCATED_TRAINER: -3},
    ("dips", EvidenceVerdict.FAULT): {Cause.DATALOADER_STALL: 10},
    ("dips", EvidenceVerdict.HEALTHY): {Cause.DATALOADER_STALL: -3},
    ("placement", EvidenceVerdict.FAULT): {Cause.CO_LOCATED_TRAINER: 10},
    ("placement", EvidenceVerdict.HEALTHY): {Cause.CO_LOCATED_TRAINER: -3},
}
STRONG = 8


def weights(seen: Observation) -> dict[str, int]:
    return WEIGHTS.get((seen.check, seen.verdict), {})


def next_step(observations: list[Observation], scores: dict[str, int]) -> str:
    """After the fleet comparison: 'conclude' (a throttle or the dips name the cause, or nothing is wrong) or
    'scheduler' (a node is behind with nothing holding its clocks: read the scheduler's records there)."""
    throttled = any(seen.check in THROTTLE_TOPICS and seen.verdict == EvidenceVerdict.FAULT for seen in observations)
    lagging = any(seen.check == "lag" and seen.verdict == EvidenceVerdict.FAULT for seen in observations)
    return "scheduler" if lagging and not throttled else "conclude"


def conclude(scores: dict[str, int]) -> str:
    """The cause to act on ('' when nothing is strong enough: the utilisation is steady, or no check explains it)."""
    best = max(scores.items(), key=lambda item: (item[1], -list(Cause.values).index(item[0])), default=("", 0))
    return best[0] if best[1] >= STRONG else ""


# --- the fix ------------------------------------------------------------------------------------------------------

POWER_LIMIT_COMMAND = "nvidia-smi-power-limit"  # apps/costs/commands.py: nvidia-smi -i N -pl W


def _faults(observations: list[Observation], *topics: str) -> list[Observation]:
    return [seen for seen in observations if seen.check in topics and seen.verdict == EvidenceVerdict.FAULT]


def fix_for(cause: str, observations: list[Observation], gpu_summaries: dict[tuple[str, int], dict]) -> tuple:
    """(summary, exact commands) for the cause; the scheduler artefacts are made by the kind (they need the
    inventory). No commands: a person acts (cooling, the loader's settings, the scheduler's configuration)."""
    if cause == Cause.GPU_POWER_CAPPED:
        commands = []
        for seen in _faults(observations, "power_cap"):
            default = gpu_summaries.get((seen.hostname, seen.data["gpu"]), {}).get("default_limit_w")
            if default:
                commands.append(
                    FixCommand(
                        seen.hostname,
                        POWER_LIMIT_COMMAND,
                        (("gpu_index", seen.data["gpu"]), ("number", int(round(default)))),
                    )
                )
        where = ", ".join(f"{c.hostname} GPU {dict(c.values)['gpu_index']}" for c in commands)
        watts = dict(commands[0].values)["number"] if commands else 0
        return f"Put the power limit back to the default {watts} W on {where}", commands
    if cause == Cause.GPU_THERMAL:
        hot = _faults(observations, "thermal", "hw_slowdown")
        where = "; ".join(f"{seen.hostname} {seen.subject}: {seen.summary}" for seen in hot[:4])
        return (
            "Cooling: check the chassis fans, airflow and inlet temperature (and the PSU for a power brake) of "
            f"{where}; drain the node until it runs at full clocks",
            [],
        )
    if cause == Cause.GPU_CLOCKS_CAPPED:
        capped = _faults(observations, "clocks_capped")
        where = ", ".join(f"{seen.hostname} {seen.subject}" for seen in capped[:8])
        return f"Reset the application clocks (nvidia-smi -rac) on {where}: the SM clock is held below its maximum", []
    if cause == Cause.DATALOADER_STALL:
        dip = next((seen for seen in observations if seen.check == "dips"), None)
        period = f" every {dip.data['period_s']:.1f} s" if dip else ""
        return (
            f"The data loader starves every rank{period}: raise num_workers (one per CPU core of the rank's "
            "NUMA node), set pin_memory=True and prefetch_factor=4, and use persistent_workers=True",
            [],
        )
    if cause == Cause.CO_LOCATED_TRAINER and any(
        "slurm_job" in seen.data for seen in _faults(observations, "placement")
    ):
        placed = _faults(observations, "placement")
        beside = [(seen.hostname, other) for seen in placed for other in seen.data["others"]]
        where = "; ".join(f"{host}: job {other['job_id']} ({other['name']})" for host, other in beside)
        return (
            f"Keep one trainer per node: requeue Slurm job {placed[0].data['slurm_job']} with OverSubscribe=NO "
            f"(--exclusive) and add #SBATCH --exclusive to its script ({where} shares its nodes)",
            [],
        )
    if cause == Cause.CO_LOCATED_TRAINER:
        placed = _faults(observations, "placement")
        where = "; ".join(f"{seen.hostname}: {', '.join(seen.data['pods'])}" for seen in placed)
        return (
            f"Keep one trainer per node: apply the regenerated pod anti-affinity and scheduler profile, then "
            f"reschedule the second trainer ({where})",
            [],
        )
    return "", []
