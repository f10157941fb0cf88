"""Suites, collectives, verdicts and run states of the benchmarks app."""

from django.db import models

GIB = 2**30
MAX_BYTES = 16 * GIB  # the largest message the suites send (nccl-tests' -e 16G)
MIN_BYTES = 8
ITERATIONS = 20  # nccl-tests' -n: timed iterations per size (its default)
MAX_ITERATIONS = 1000


class Suite(models.TextChoices):
    """What a benchmark run does."""

    NCCL = "nccl", "NCCL tests (one node, or a set of nodes with mpirun)"
    SWEEP = "nccl-sweep", "NCCL sweep: find the slow node or link by halving"
    PAIRWISE = "nccl-pairwise", "NCCL pairwise: every pair of a small set"
    HPL_MXP = "hpl-mxp", "HPL-MxP: mixed-precision LU on each node, then across the set"
    HPL = "hpl", "HPL: classic FP64 Linpack (xhpl) on each node, then across the set"
    NVBANDWIDTH = "nvbandwidth", "nvbandwidth: host and device copy bandwidth of each node"
    BURN_IN = "burn-in", "Burn-in soak: gpu_burn with clocks and temperatures sampled"


NCCL_SUITES = frozenset({Suite.NCCL, Suite.SWEEP, Suite.PAIRWISE})
# Suites that run on each node alone (HPL-MxP also once across the set), measuring named figures (Measurement rows).
NODE_SUITES = frozenset({Suite.HPL_MXP, Suite.HPL, Suite.NVBANDWIDTH, Suite.BURN_IN})
HPL_SUITES = frozenset({Suite.HPL_MXP, Suite.HPL})  # each node alone, then once across the set; one SKU
MIXED_SKUS_ALLOWED = frozenset({Suite.NVBANDWIDTH, Suite.BURN_IN})  # each node is judged against its own SKU


class BurnLoad(models.TextChoices):
    """What loads the GPUs during a burn-in soak."""

    GPU_BURN = "gpu-burn", "gpu_burn for the chosen duration"
    DCGM_R3 = "dcgmi-r3", "dcgmi diag -r 3 (long: targeted stress and power, memory bandwidth)"
    DCGM_R4 = "dcgmi-r4", "dcgmi diag -r 4 (extended)"


DCGM_LEVELS = {BurnLoad.DCGM_R3: 3, BurnLoad.DCGM_R4: 4}
DCGM_NOMINAL_SECONDS = {3: 1800, 4: 7200}  # DCGM's guide: level 3 up to ~30 min, level 4 1–2 h (sampling budget)

BURN_IN_MIN_SECONDS = 60
BURN_IN_MAX_SECONDS = 4 * 3600
BURN_IN_DEFAULT_SECONDS = 900  # long enough to see a cooling fault that takes ten minutes to show
SOAK_MAX_SAMPLES = 3600  # per GPU; the sampling interval grows with the duration to stay under it
SOAK_MIN_INTERVAL_MS = 1000
HPL_MIN_N = 1024
HPL_MAX_N = 4_000_000
HPL_NB = 1024  # NVIDIA's suggested block for Hopper and Ampere in HPC-Benchmarks' HPL-MxP


class Collective(models.TextChoices):
    ALL_REDUCE = "all_reduce", "all_reduce"
    ALL_GATHER = "all_gather", "all_gather"
    REDUCE_SCATTER = "reduce_scatter", "reduce_scatter"
    ALLTOALL = "alltoall", "alltoall"
    SENDRECV = "sendrecv", "sendrecv"
    BROADCAST = "broadcast", "broadcast"


class Verdict(models.TextChoices):
    """pass / warn / fail against the reference tiers; could-not-run when the test gave no figure (never a pass)."""

    PASS = "pass", "Pass"
    WARN = "warn", "Warn"
    FAIL = "fail", "Fail"
    COULD_NOT_RUN = "could_not_run", "Could not run"


def judge_against(value: float | None, *, warn_below: float, fail_below: float) -> str:
    """A figure against its tiers: could-not-run without one, fail below the fail tier, warn below the warn tier."""
    if value is None:
        return Verdict.COULD_NOT_RUN
    if value < fail_below:
        return Verdict.FAIL
    if value < warn_below:
        return Verdict.WARN
    return Verdict.PASS


VERDICT_COLOURS = {Verdict.PASS: "green", Verdict.WARN: "orange", Verdict.FAIL: "red", Verdict.COULD_NOT_RUN: "grey"}
BAD_VERDICTS = frozenset({Verdict.WARN, Verdict.FAIL, Verdict.COULD_NOT_RUN})


class RunStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    ERROR = "error", "Error"
    CANCELED = "canceled", "Canceled"


ACTIVE = frozenset({RunStatus.QUEUED, RunStatus.RUNNING})
TERMINAL = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.ERROR, RunStatus.CANCELED})
RUN_STATUS_COLOURS = {
    RunStatus.QUEUED: "grey",
    RunStatus.RUNNING: "blue",
    RunStatus.SUCCEEDED: "green",
    RunStatus.FAILED: "red",
    RunStatus.ERROR: "red",
    RunStatus.CANCELED: "orange",
}


class Scope(models.TextChoices):
    """Where a reference applies: inside one node (NVLink) or across nodes (the fabric)."""

    INTRA = "intra", "Inside a node"
    INTER = "inter", "Across nodes"


class Purpose(models.TextChoices):
    """Why a test ran: the sweep's steps, a pairwise pair, or a plain run."""

    RUN = "run", "Run"
    WHOLE = "whole", "Whole set"
    HALF = "half", "Half"
    ISOLATE = "isolate", "Against a known-good partner"
    CONFIRM = "confirm", "Confirm after cool-down"
    PAIR = "pair", "Pair"
    RETEST = "retest", "Re-test after cool-down"


REGRESSION_PCT = 5.0  # a test more than this much below its scope's accepted baseline is flagged
ROBUST_Z_OUTLIER = -3.5  # Iglewicz and Hoaglin's cut-off for the modified z-score

BENCHMARK_TRANSPORTS = [("ssh", "ssh"), ("sim", "sim")]  # mpirun needs real ssh between nodes, or the simulator
# The per-node suites also run on the worker's own host (`local`: one node, the one the worker runs on).
NODE_SUITE_TRANSPORTS = [("ssh", "ssh"), ("local", "local"), ("sim", "sim")]


class TimelineOrigin(models.TextChoices):
    """Where a timeline analysis' traces came from."""

    UPLOAD = "upload", "Uploaded trace"
    TRAINING_JOB = "training-job", "Taken from a training job"
    NODE = "node", "Read off nodes"


class ComputeBasis(models.TextChoices):
    """What a rank's compute time was read from (apps/parsers/timeline_steps.py)."""

    GPU_KERNELS = "gpu_kernels", "GPU kernels"
    OPERATORS = "operators", "CPU operators (no kernels traced)"
    NONE = "none", "None (a Horovod timeline: communication only)"


# The design brief's case study: communication took 35 % of a training step before the fixes, 12 % after.
CASE_STUDY_COMMUNICATION_PCT = {"before": 35.0, "after": 12.0}
TIMELINE_MAX_FILE_BYTES = 64 * 2**20  # one uploaded file as sent (a .json.gz, or plain JSON)
TIMELINE_MAX_TRACE_BYTES = 512 * 2**20  # one trace decompressed; past it the file is refused (a gzip bomb)
TIMELINE_MAX_FILES = 64  # one trace per rank
TIMELINE_MAX_STEPS = 200  # steps kept per rank in the stored series (the shares count every step)
