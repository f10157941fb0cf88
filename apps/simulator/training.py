"""A simulated training job: its launcher's log on each node, as a function of the seed, the time and the faults.

Pure functions over plain values (the simulator never imports apps.workloads): a TrainingRun says what runs where
(hosts in node-rank order, ranks per node, checkpoint directory and interval, seed, start time), a Disruption says
what went wrong on one host from when to when. `render_log(run, host, disruptions, t)` is the log that host's
torchrun agent has written by time t, in the real formats (torchrun's elastic agent, ProcessGroupNCCL's watchdog,
NCCL WARN lines, Megatron-style iteration lines), and `saved_checkpoints` the checkpoint files it has written.

The model, so that a test can predict every line:
- step k ends at `started + STARTUP + k * step_seconds`; rank 0 prints an iteration line every `log_every` steps;
  a checkpoint is saved every `checkpoint_interval` steps (`<dir>/step_<k:07d>.pt`);
- a network fault (NIC down, PFC off, MTU mismatch) on a host hangs the collective in flight: its ranks stop
  enqueueing work while their peers enqueue two more; if it lasts past the timeout, every rank's watchdog fires
  (the host's ranks show the lower "last enqueued NCCL work": they lag) and its GPUs behind the faulty NIC print
  NCCL's NET/IB retry-exceeded warning first; the agents then tear the workers down;
- XID 79 on a GPU kills that rank at once with a CUDA error; the others time out;
- a mount that stops answering (storage_slow) hangs the host's ranks like a network fault, without NET/IB lines,
  and so does a data loader's one long stall (dataloader_stall with hang_s) for as long as it lasts;
- a full checkpoint volume fails the next save with "No space left on device" on that host's ranks;
- once a fault ends (a repair), the elastic agent restarts the workers `RESTART_SECONDS` later and they resume from
  the newest checkpoint saved before the failure.
Seeded noise only touches printed figures (loss, elapsed ms, pids), never when something happens.
"""

import hashlib
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial

from apps.simulator.choices import FaultEffect, FaultKind, kinds_with

STARTUP_SECONDS = 45.0  # rendezvous, NCCL init and the first checkpoint load
RESTART_SECONDS = 30.0  # the elastic agent's monitor interval and the new rendezvous
COLLECTIVES_PER_STEP = 4  # ProcessGroupNCCL work items per step (gradient all-reduce buckets)
NETWORK_FAULTS = kinds_with(FaultEffect.NETWORK_HANG)
# A mount that stops answering (storage_slow) hangs the node's ranks in their data loader or checkpoint I/O: like a
# network fault their peers wait in the next collective until the watchdog fires, with no NET/IB warning.
HANG_FAULTS = kinds_with(FaultEffect.NETWORK_HANG, FaultEffect.IO_HANG)
# A data loader stall is fatal only when one stall outlasts the watchdog (training_faults.loader_hangs): then its
# node's ranks hang like a mount's, and the agent restarts the workers once the stall is over.
FATAL_FAULTS = kinds_with(FaultEffect.NETWORK_HANG, FaultEffect.IO_HANG, FaultEffect.LOADER_HANG, FaultEffect.CRASH)
ALLREDUCE_NUMEL = 26_214_400  # elements in one gradient bucket (100 MiB of fp32)
SCRIPT = "pretrain_gpt.py"
# A checkpoint is a PyTorch Distributed Checkpoint directory: one shard per rank, then `.metadata`, which the
# coordinator writes only after every shard is written (the completeness marker), then the job's hash manifest.
SHARD_BYTES = 2_147_483_648 + 4_194_304  # one rank's shard of model and optimizer state
MARKER = ".metadata"
MANIFEST_NAME = "SHA256SUMS"
METADATA_BYTES = 1_843_200


@dataclass(frozen=True)
class TrainingRun:
    """What one training job is, in plain values."""

    name: str
    hosts: tuple[str, ...]  # in node-rank order
    ranks_per_node: int
    checkpoint_dir: str
    checkpoint_interval: int
    seed: int
    started: float  # epoch seconds
    log_path: str
    step_seconds: float = 1.6
    log_every: int = 10
    timeout_ms: int = 600_000
    train_iters: int = 5_000_000  # Llama-scale pre-training: months at 1.6 s a step, never done in a demo
    resumes: tuple["Resume", ...] = ()  # relaunches from a chosen checkpoint (the recovery's torchrun), by time
    launcher: str = ""  # torchrun, mpirun, slurm, kubernetes: which scheduler's controller lists the run

    @property
    def world_size(self) -> int:
        return len(self.hosts) * self.ranks_per_node

    def ranks_of(self, host: str) -> list[int]:
        node_rank = self.hosts.index(host)
        return [node_rank * self.ranks_per_node + local for local in range(self.ranks_per_node)]


@dataclass(frozen=True)
class Disruption:
    """A fault on one host of the run, from `start` to `end` (None: still there). `links` are the GPUs it touches,
    each as (local rank, RDMA device, the NIC's IPv4 address): the GPUs behind a faulty NIC, or the lost GPU."""

    host: str
    kind: str
    start: float
    end: float | None = None
    target: str = ""
    links: tuple[tuple[int, str, str], ...] = ()


@dataclass(frozen=True)
class Resume:
    """The run relaunched at `at` on `hosts` (node-rank order), loading the checkpoint of `step`."""

    at: float
    step: int
    hosts: tuple[str, ...]


@dataclass
class _Line:
    at: float
    host: str | None  # None: rank 0's node prints it (iteration lines); else that host's agent or ranks
    content: str | Callable[[], str]  # a callable for lines only a rendered log needs (the iteration lines)

    @property
    def text(self) -> str:
        return self.content if isinstance(self.content, str) else self.content()


@dataclass
class _Timeline:
    lines: list[_Line] = field(default_factory=list)
    checkpoints: list[int] = field(default_factory=list)  # steps saved completely
    partial: dict[int, tuple[int, int]] = field(default_factory=dict)  # step -> (world size, shards written)
    world: dict[int, int] = field(default_factory=dict)  # step -> world size of the complete save

    def add(self, at: float, host: str | None, text: "str | Callable[[], str]") -> None:
        self.lines.append(_Line(at, host, text))


def _noise(run: TrainingRun, *words) -> random.Random:
    digest = hashlib.blake2b(repr((run.seed, run.name, *words)).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def _glog(at: float, level: str = "I") -> str:
    """glog's prefix stamp: E1201 06:24:44.903881913."""
    moment = datetime.fromtimestamp(at, UTC)
    return f"{level}{moment:%m%d %H:%M:%S}.{moment.microsecond:06d}{int(at * 1e9) % 1000:03d}"


def _clock(at: float) -> str:
    return f"{datetime.fromtimestamp(at, UTC):%Y-%m-%d %H:%M:%S}"


def _pid(run: TrainingRun, host: str, local: int, attempt: int) -> int:
    return 40_000 + _noise(run, "pid", host, attempt).randrange(1000, 9000) + local


def _launch(
    run: TrainingRun, at: float, attempt: int, timeline: _Timeline, resume_step: int, disruptions=()
) -> float | None:
    """The agents start the workers; rank 0 loads the checkpoint of `resume_step`. Returns when the workers died
    if the checkpoint did not load (None: it loaded, or there was none to load)."""
    for host in run.hosts:
        agent = _pid(run, host, 99, attempt)
        timeline.add(
            at,
            host,
            f"{_glog(at)} {agent} torch/distributed/elastic/agent/server/api.py:525] [default] Starting worker "
            f"group (attempt {attempt}): rdzv_endpoint={run.hosts[0]}:29500, nnodes={len(run.hosts)}, "
            f"nproc_per_node={run.ranks_per_node}",
        )
    first = run.hosts[0]
    if resume_step:
        path = checkpoint_path(run, resume_step)
        timeline.add(at + 20, first, f" loading checkpoint from {run.checkpoint_dir} at iteration {resume_step}")
        problem = checkpoint_problem(run, timeline, disruptions, resume_step, at + 20)
        if problem:
            for text in _traceback_lines(0, _LOAD_FRAMES + loader_error(path, problem)):
                timeline.add(at + 21, first, text)
            _agent_failure(run, first, 0, at + 23, 1, timeline, attempt)
            return at + 23
        timeline.add(
            at + 40,
            first,
            f"  successfully loaded checkpoint from {path} [ t 1/1, p 1/1 ] at iteration {resume_step}",
        )
    else:
        timeline.add(at + 40, first, f" no checkpoint in {run.checkpoint_dir}: training starts at iteration 0")
    return None


_LOAD_FRAMES = [
    "Traceback (most recent call last):",
    f'  File "/workspace/{SCRIPT}", line 231, in <module>',
    "    pretrain(train_valid_test_datasets_provider, model_provider, forward_step)",
    '  File "/workspace/megatron/training/training.py", line 289, in pretrain',
    "    iteration, num_floating_point_operations_so_far = load_checkpoint(",
    '  File "/workspace/megatron/training/checkpointing.py", line 1102, in load_checkpoint',
    "    state_dict = dcp.load(state_dict, checkpoint_id=checkpoint_name)",
]


def loader_error(path: str, problem: str) -> list[str]:
    """The frames and the last line PyTorch's DCP reader gives for a checkpoint that does not load.

    problem: "missing" (no such directory), "incomplete" (no .metadata: the save never finished), or "corrupt:<file>"
    (a torn or flipped shard: torch.load cannot find the zip archive's central directory)."""
    torch = "/usr/local/lib/python3.10/dist-packages/torch"
    if problem.startswith("corrupt"):
        return [
            f'  File "{torch}/distributed/checkpoint/filesystem.py", line 657, in read_data',
            "    tensor = torch.load(",
            f'  File "{torch}/serialization.py", line 1326, in load',
            "    with _open_zipfile_reader(opened_file) as opened_zipfile:",
            f'  File "{torch}/serialization.py", line 671, in __init__',
            "    super().__init__(torch._C.PyTorchFileReader(name_or_buffer))",
            "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory",
        ]
    return [
        f'  File "{torch}/distributed/checkpoint/filesystem.py", line 764, in read_metadata',
        '    with self.fs.create_stream(path, "rb") as metadata_file:',
        f'  File "{torch}/distributed/checkpoint/filesystem.py", line 447, in create_stream',
        "    with path.open(mode) as stream:",
        f"FileNotFoundError: [Errno 2] No such file or directory: '{path}/{MARKER}'",
    ]


def shard_name(rank: int) -> str:
    return f"__{rank}_0.distcp"


def _under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def checkpoint_problem(run: TrainingRun, timeline: _Timeline, disruptions, step: int, at: float) -> str:
    """Why the checkpoint of `step` would not load at `at` ('' when it loads)."""
    path = checkpoint_path(run, step)
    happened = [d for d in disruptions if d.start <= at]
    if any(d.kind == "removed" and _under(path, d.target) for d in happened):
        return "missing"
    if step not in timeline.checkpoints:
        return "incomplete" if step in timeline.partial else "missing"
    torn = sorted(d.target for d in happened if d.kind == FaultKind.CORRUPT_CHECKPOINT and _under(d.target, path))
    if torn:
        name = torn[0][len(path) :].strip("/") or shard_name(0)
        return f"corrupt:{name}"
    return ""


def checkpoint_path(run: TrainingRun, step: int) -> str:
    """The checkpoint directory of one step."""
    return f"{run.checkpoint_dir.rstrip('/')}/step_{step:07d}"


PEAK_LR, MIN_LR, WARMUP_STEPS = 3.0e-4, 3.0e-5, 2000  # Megatron's --lr, --min-lr, --lr-warmup-iters


def learning_rate(run: TrainingRun, step: int) -> float:
    """Megatron's default schedule: linear warm-up to the peak, then cosine decay to the minimum at train_iters."""
    if step <= WARMUP_STEPS:
        return PEAK_LR * step / WARMUP_STEPS
    progress = min(1.0, (step - WARMUP_STEPS) / max(1, run.train_iters - WARMUP_STEPS))
    return MIN_LR + (PEAK_LR - MIN_LR) * 0.5 * (1 + math.cos(math.pi * progress))


def expected_loss(step: int) -> float:
    """The loss curve without noise: a decay towards the floor the model reaches; a function of the step alone, so a
    run resumed from a checkpoint carries on from the loss of the step it loaded."""
    return 2.1 + 8.4 * math.exp(-step / 4000.0)


LOSS_NOISE = 0.03  # seeded per run and step: the same step prints the same loss when it is run again


def _iteration_line(run: TrainingRun, step: int, at: float, slow_ms: float = 0.0) -> str:
    noise = _noise(run, "step", step)
    elapsed = run.step_seconds * 1000 * (1 + noise.uniform(-0.02, 0.02)) + slow_ms
    loss = expected_loss(step) + noise.uniform(-LOSS_NOISE, LOSS_NOISE)
    return (
        f" [{_clock(at)}] iteration {step:>8}/{run.train_iters:>8} | consumed samples: {step * 512:>12} | "
        f"elapsed time per iteration (ms): {elapsed:.1f} | learning rate: {learning_rate(run, step):.6E} | "
        f"global batch size:   512 | "
        f"lm loss: {loss:.6E} | loss scale: 1.0 | grad norm: {0.6 + noise.uniform(0, 0.4):.3f} | "
        "number of skipped iterations:   0 | number of nan iterations:   0 |"
    )


def _disk_full_at(disruptions: list[Disruption], run: TrainingRun, at: float) -> Disruption | None:
    for disruption in disruptions:
        if disruption.kind != FaultKind.DISK_FULL or not run.checkpoint_dir.startswith(
            disruption.target.rstrip("/") + "/"
        ):
            continue
        if disruption.host not in run.hosts:
            continue
        if disruption.start <= at and (disruption.end is None or at < disruption.end):
            return disruption
    return None


def _first_fatal(disruptions: list[Disruption], after: float) -> Disruption | None:
    """The fatal fault that strikes first at or after `after` (one already there strikes at once)."""
    candidates = [d for d in disruptions if d.kind in FATAL_FAULTS and (d.end is None or d.end > after)]
    return min(candidates, key=lambda d: (max(d.start, after), d.host, d.target), default=None)


def simulate(run: TrainingRun, disruptions: list[Disruption], t: float) -> _Timeline:
    """Everything the run writes up to time t (and the lines of a failure under way), every host's together.

    A failure the elastic agent can restart from (a network fault or a lost GPU, once repaired) restarts the workers
    by itself; a failed checkpoint save, a checkpoint that does not load, or a fault never repaired ends the run
    until a Resume relaunches it (on the resume's hosts, from the resume's step). A Resume while the run works
    stops it then and relaunches it the same way (a requeue around a drained node)."""
    timeline = _Timeline()
    attempt, step, begin, launch = 0, 0, run.started, True
    resumes = sorted(run.resumes, key=lambda resume: resume.at)
    current = run
    while begin < t:
        failed_at, cause, terminal, preempt = None, None, False, None
        if launch:
            failed_at = _launch(current, begin, attempt, timeline, step, disruptions)
            first = begin + STARTUP_SECONDS
            terminal = failed_at is not None
        if not terminal:
            base = step
            fatal = _first_fatal([d for d in disruptions if d.host in current.hosts], first)
            stop_at = max(fatal.start, first) if fatal else math.inf
            # A relaunch while the run works replaces it (a scheduler's requeue around a drained node): it stops then.
            preempt = next((resume for resume in resumes if begin < resume.at < stop_at), None)
            bound = min(t, stop_at, preempt.at if preempt else math.inf)
            done, step = step, _last_step(current, base, first, step, bound)  # unless a save fails
            for written in _steps_that_write(current, done, step):  # the steps that print or save, not every step
                ends = first + (written - base) * current.step_seconds
                if written % current.log_every == 0:
                    timeline.add(ends, current.hosts[0], partial(_iteration_line, current, written, ends))
                if written % current.checkpoint_interval == 0:
                    full = _disk_full_at(disruptions, current, ends)
                    if full is not None:
                        _save_failed(current, full, written, ends, timeline, attempt)
                        failed_at, cause, terminal, step = ends + 5, full, True, written
                        break
                    _saved(current, written, ends, timeline)
        if failed_at is None and preempt is not None and preempt.at <= t:
            _stopped(current, preempt.at, timeline, attempt)
            resumes.remove(preempt)
            attempt += 1
            current = replace(run, hosts=preempt.hosts)
            step, begin, launch = preempt.step, preempt.at, True
            continue
        if failed_at is None:
            if fatal is None or stop_at > t:
                return timeline
            cleared = (
                fatal.kind in NETWORK_FAULTS
                and fatal.end is not None
                and fatal.end < stop_at + current.timeout_ms / 1000
            )
            if cleared:  # the collective completes late; no restart
                step += 1
                if step % current.log_every == 0:
                    timeline.add(
                        fatal.end,
                        current.hosts[0],
                        _iteration_line(current, step, fatal.end, (fatal.end - stop_at) * 1000),
                    )
                first, begin, launch = fatal.end, fatal.end, False
                continue
            failed_at, cause = _fatal(current, fatal, stop_at, step, timeline, attempt), fatal
            terminal = cause.end is None
        if failed_at > t:
            return timeline
        if terminal:
            resume = next((resume for resume in resumes if resume.at >= failed_at), None)
            if resume is None or resume.at > t:
                return timeline
            resumes.remove(resume)
            attempt += 1
            current = replace(run, hosts=resume.hosts)
            step, begin, launch = resume.step, resume.at, True
            continue
        attempt += 1
        step = max([saved for saved in timeline.checkpoints if saved <= step], default=0)
        begin, launch = max(cause.end, failed_at) + RESTART_SECONDS, True
        for host in current.hosts:
            timeline.add(
                begin - 1,
                host,
                f"{_glog(begin - 1, 'W')} {_pid(current, host, 99, attempt - 1)} "
                "torch/distributed/elastic/agent/server/api.py:719] [default] Worker group FAILED. "
                f"{max(3 - attempt, 0)}/3 attempts left; will restart worker group",
            )
    return timeline


def _stopped(run: TrainingRun, at: float, timeline: _Timeline, attempt: int) -> None:
    """The agents stop the workers: the scheduler ends the run to relaunch it elsewhere."""
    for host in run.hosts:
        timeline.add(
            at,
            host,
            f"{_glog(at, 'W')} {_pid(run, host, 99, attempt)} torch/distributed/elastic/agent/server/api.py:704] "
            "Received Signals.SIGTERM death signal, shutting down workers",
        )


def _last_step(run: TrainingRun, base: int, first: float, step: int, bound: float) -> int:
    """The last step (from `step`, the one done, to train_iters) that ends by `bound`: step k ends at
    first + (k - base) * step_seconds, the same sum for every k, so a long run is not walked step by step."""
    last = max(step, min(run.train_iters, base + math.floor((bound - first) / run.step_seconds)))
    while last > step and first + (last - base) * run.step_seconds > bound:
        last -= 1
    while last < run.train_iters and first + (last + 1 - base) * run.step_seconds <= bound:
        last += 1
    return last


def _steps_that_write(run: TrainingRun, done: int, last: int) -> list[int]:
    """The steps after `done` up to `last` that print an iteration line or save a checkpoint, in order."""

    def multiples(every: int) -> range:
        return range((done // every + 1) * every, last + 1, every)

    return sorted(set(multiples(run.log_every)) | set(multiples(run.checkpoint_interval)))


def _saved(run: TrainingRun, step: int, at: float, timeline: _Timeline) -> None:
    first = run.hosts[0]
    path = checkpoint_path(run, step)
    timeline.add(at + 0.2, first, f" saving checkpoint at iteration {step:>7} to {run.checkpoint_dir}")
    timeline.add(at + 4.0, first, f"  successfully saved checkpoint from iteration {step:>7} to {path}")
    timeline.checkpoints.append(step)
    timeline.world[step] = run.world_size


def _traceback_lines(rank: int, lines: list[str]) -> list[str]:
    return [f"[rank{rank}]: {line}" for line in lines]


def _save_failed(run, full: Disruption, step: int, at: float, timeline: _Timeline, attempt: int) -> None:
    """The first rank of the full host cannot write its shard: the ranks before it wrote theirs, its own shard is
    left empty, the rest never start, and no .metadata is written (the checkpoint is incomplete)."""
    failing = run.ranks_of(full.host)[0]
    path = f"{checkpoint_path(run, step)}/{shard_name(failing)}"
    timeline.partial[step] = (run.world_size, failing)
    timeline.add(at + 0.2, run.hosts[0], f" saving checkpoint at iteration {step:>7} to {run.checkpoint_dir}")
    for rank in (failing,):
        for text in _traceback_lines(
            rank,
            [
                "Traceback (most recent call last):",
                f'  File "/workspace/{SCRIPT}", line 231, in <module>',
                "    pretrain(train_valid_test_datasets_provider, model_provider, forward_step)",
                '  File "/workspace/megatron/training/training.py", line 412, in pretrain',
                "    save_checkpoint(iteration, model, optimizer, opt_param_scheduler)",
                '  File "/workspace/megatron/training/checkpointing.py", line 398, in save_checkpoint',
                "    dcp.save(state_dict, checkpoint_id=checkpoint_name)",
                '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/checkpoint/filesystem.py", line '
                "338, in _write_files_from_queue",
                '    with create_stream(file_name, "wb") as stream:',
                f"OSError: [Errno 28] No space left on device: '{path}'",
            ],
        ):
            timeline.add(at + 2.0, full.host, text)
    _agent_failure(run, full.host, 0, at + 5, 1, timeline, attempt)


def _agent_failure(run, host, local, at, exitcode, timeline, attempt) -> None:
    rank = run.ranks_of(host)[local]
    pid = _pid(run, host, local, attempt)
    agent = _pid(run, host, 99, attempt)
    signal = f"Signal 6 (SIGABRT) received by PID {pid}" if exitcode == -6 else "<N/A>"
    timeline.add(
        at,
        host,
        f"{_glog(at, 'E')} {agent} torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: "
        f"{exitcode}) local_rank: {local} (pid: {pid}) of binary: /usr/bin/python3",
    )
    for text in (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        f"{SCRIPT} FAILED",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        f"  time      : {datetime.fromtimestamp(at, UTC):%Y-%m-%d_%H:%M:%S}",
        f"  host      : {host}",
        f"  rank      : {rank} (local_rank: {local})",
        f"  exitcode  : {exitcode} (pid: {pid})",
        "  error_file: <N/A>",
        f"  traceback : {signal}",
        "============================================================",
    ):
        timeline.add(at + 0.5, host, text)


def _fatal(run, fault: Disruption, at: float, step: int, timeline: _Timeline, attempt: int) -> float:
    """The lines of a fatal fault striking at `at` during step+1; returns when the workers are gone."""
    seq = (step + 1) * COLLECTIVES_PER_STEP + 1  # the step's first gradient bucket
    fires = at + run.timeout_ms / 1000
    if fault.kind == FaultKind.XID79:
        local = fault.links[0][0] if fault.links else 0
        rank = run.ranks_of(fault.host)[local]
        timeline.add(
            at + 0.1,
            fault.host,
            f"[rank{rank}]:[{_glog(at + 0.1, 'E')} ProcessGroupNCCL.cpp:1834] [PG ID 0 PG GUID 0(default_pg) Rank "
            f"{rank}] Process group watchdog thread terminated with exception: CUDA error: unspecified launch failure",
        )
        timeline.add(at + 0.1, fault.host, f"[rank{rank}]: RuntimeError: CUDA error: unspecified launch failure")
        _agent_failure(run, fault.host, local, at + 2, 1, timeline, attempt)
        dead = {rank}
    else:
        dead = set()
        for local, device, address in fault.links:
            _ib_warning(run, fault.host, local, device, address, at + 7 + local * 0.01, timeline, attempt)
    lagging = set(run.ranks_of(fault.host))
    noise = _noise(run, "watchdog", at)
    for host in run.hosts:
        for rank in run.ranks_of(host):
            if rank in dead:
                continue
            when = fires + noise.uniform(0.0, 0.09)
            ran = int(run.timeout_ms + noise.uniform(5, 99))
            enqueued = seq if rank in lagging else seq + 2
            timeline.add(
                when,
                host,
                f"[rank{rank}]:[{_glog(when, 'E')} ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught "
                f"collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn={ALLREDUCE_NUMEL}, "
                f"NumelOut={ALLREDUCE_NUMEL}, Timeout(ms)={run.timeout_ms}) ran for {ran} milliseconds before "
                "timing out.",
            )
            timeline.add(
                when + 0.002,
                host,
                f"[rank{rank}]:[{_glog(when + 0.002, 'E')} ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) "
                f"Rank {rank}] Exception (either an error or timeout) detected by watchdog at work: {seq}, last "
                f"enqueued NCCL work: {enqueued}, last completed NCCL work: {seq - 1}.",
            )
    for host in run.hosts:
        if host != fault.host or fault.kind != FaultKind.XID79:
            _agent_failure(run, host, 0, fires + 1, -6, timeline, attempt)
    return fires + 1


def _ib_warning(run, host: str, local: int, device: str, address: str, at: float, timeline, attempt: int) -> None:
    pid = _pid(run, host, local, attempt)
    peer_host = run.hosts[(run.hosts.index(host) + 1) % len(run.hosts)]
    peer = _noise(run, "peer", peer_host).randrange(2, 250)
    timeline.add(
        at,
        host,
        f"{host}:{pid}:{pid + 77} [{local}] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from "
        f"peer 10.0.{run.hosts.index(peer_host) % 250}.{peer}<{43000 + local}> with status=12 opcode=0 len=0 vendor "
        f"err 129 (Send) localGid ::ffff:{address or '0.0.0.0'} hca {device or 'mlx5_0'}",
    )
    timeline.add(at, host, f"{host}:{pid}:{pid + 77} [{local}] NCCL INFO transport/net.cc:1298 -> 6")


def all_hosts(run: TrainingRun) -> tuple[str, ...]:
    """Every host the run has used: its first placement's, then each resume's."""
    hosts = list(run.hosts)
    for resume in run.resumes:
        hosts += [host for host in resume.hosts if host not in hosts]
    return tuple(hosts)


def render_log(run: TrainingRun, host: str, disruptions: list[Disruption], t: float, last: int | None = None) -> str:
    """The log on `host` at time t: its agent's and ranks' lines; node rank 0's also holds the iteration lines.
    `last`: only its last lines (what `tail -n` prints), so a month-long run's log is not written out whole."""
    if host not in all_hosts(run) or t < run.started:
        return ""
    timeline = simulate(run, disruptions, t)
    first = run.hosts[0]
    mine = [line for line in timeline.lines if line.at <= t and (line.host or first) == host]
    mine.sort(key=lambda line: line.at)
    if last is not None:
        mine = mine[-last:] if last else []
    return "".join(line.text + "\n" for line in mine)


@dataclass(frozen=True)
class CheckpointFile:
    path: str
    size: int
    digest: str  # what sha256sum reads from it now
    expected: str = ""  # what the manifest says (blank: not in a manifest)


def _digest(path: str, size: int, torn: bool = False) -> str:
    return hashlib.sha256(f"{path}:{size}{':torn' if torn else ''}".encode()).hexdigest()


def checkpoint_files(run: TrainingRun, disruptions: list[Disruption], t: float) -> dict[str, list[CheckpointFile]]:
    """The checkpoint directories on the run's volume at time t (removed ones gone), each with its files: a shard
    per rank, the .metadata marker and the manifest for a complete save; the shards written so far for one that
    failed part-way (the failing rank's shard empty)."""
    timeline = simulate(run, disruptions, t)
    happened = [d for d in disruptions if d.start <= t]
    torn = {d.target for d in happened if d.kind == FaultKind.CORRUPT_CHECKPOINT}
    directories: dict[str, list[CheckpointFile]] = {}
    steps = sorted(set(timeline.checkpoints) | set(timeline.partial))
    for step in steps:
        path = checkpoint_path(run, step)
        if any(d.kind == "removed" and _under(path, d.target) for d in happened):
            continue
        files = []
        if step in timeline.checkpoints:
            world = timeline.world.get(step, run.world_size)
            shards = [(f"{path}/{shard_name(rank)}", SHARD_BYTES) for rank in range(world)]
            broken = {
                f"{path}/{shard_name(0)}" if target == path else target for target in torn if _under(target, path)
            }
            for name, size in shards:
                files.append(CheckpointFile(name, size, _digest(name, size, name in broken), _digest(name, size)))
            marker = f"{path}/{MARKER}"
            files.append(
                CheckpointFile(marker, METADATA_BYTES, _digest(marker, METADATA_BYTES), _digest(marker, METADATA_BYTES))
            )
            manifest = manifest_text(files) or ""
            digest = hashlib.sha256(manifest.encode()).hexdigest()
            files.append(CheckpointFile(f"{path}/{MANIFEST_NAME}", len(manifest), digest))
        else:
            world, written = timeline.partial[step]
            for rank in range(written + 1):
                name, size = f"{path}/{shard_name(rank)}", SHARD_BYTES if rank < written else 0
                files.append(CheckpointFile(name, size, _digest(name, size)))
        directories[path] = files
    return directories


def manifest_text(files: list[CheckpointFile]) -> str | None:
    """The SHA256SUMS the job writes after a complete save: every shard and the marker."""
    return "".join(f"{file.expected}  {file.path}\n" for file in files if file.expected)


def saved_checkpoints(run: TrainingRun, disruptions: list[Disruption], t: float) -> list[str]:
    """The checkpoint directories the run has on its volume at time t (complete or not)."""
    return list(checkpoint_files(run, disruptions, t))


# --- the runs the simulator knows about -------------------------------------------------------------------------

RunSource = Callable[[str | None], list[TrainingRun]]  # None: every run of the cluster
_sources: list[RunSource] = []


def register_run_source(source: RunSource) -> None:
    """A higher layer (which knows the workloads) tells the simulator which runs a host takes part in."""
    if source not in _sources:
        _sources.append(source)


def runs_on(hostname: str) -> list[TrainingRun]:
    return [run for source in _sources for run in source(hostname)]


def cluster_runs() -> list[TrainingRun]:
    """Every run of the cluster, as the scheduler's controller knows them."""
    return [run for source in _sources for run in source(None)]
