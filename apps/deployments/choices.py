from django.db import models


class Phase(models.IntegerChoices):
    """The brief's four phases, in the order a node goes through them."""

    ENVIRONMENT = 1, "Environment preparation"
    BASE = 2, "Base environment"
    CLUSTER = 3, "Cluster"
    SOFTWARE = 4, "Software stack"
    CLUSTER_ACCEPTANCE = 5, "Cluster acceptance"


class DeploymentState(models.TextChoices):
    """Where a deployment is in its life. Running and finished states follow its latest run's job."""

    DRAFT = "draft", "Draft"
    APPROVED = "approved", "Approved"
    RUNNING = "running", "Running"
    PASSED = "passed", "Passed"
    FAILED = "failed", "Needs attention"
    CANCELED = "canceled", "Canceled"


DEPLOYMENT_STATE_COLOURS = {
    DeploymentState.DRAFT: "grey",
    DeploymentState.APPROVED: "blue",
    DeploymentState.RUNNING: "blue",
    DeploymentState.PASSED: "green",
    DeploymentState.FAILED: "red",
    DeploymentState.CANCELED: "black",
}


class WizardStage(models.TextChoices):
    NODES = "nodes", "Pick nodes"
    VERSIONS = "versions", "Versions and baselines"
    REVIEW = "review", "Review plan"
    APPROVE = "approve", "Approve"
    RUN = "run", "Run"


class Outcome(models.TextChoices):
    """An acceptance check's verdict."""

    PASS = "pass", "Pass"
    WARN = "warn", "Warn"
    FAIL = "fail", "Fail"
    COULD_NOT_RUN = "could_not_run", "Could not run"


OUTCOME_COLOURS = {
    Outcome.PASS: "green",
    Outcome.WARN: "yellow",
    Outcome.FAIL: "red",
    Outcome.COULD_NOT_RUN: "grey",
}
# What counts as verified: a warning passes, with its note in the report.
VERIFIED_OUTCOMES = frozenset({Outcome.PASS, Outcome.WARN})
# The worst outcome of a set decides the cell: fail > could not run > warn > pass.
OUTCOME_RANK = {Outcome.PASS: 0, Outcome.WARN: 1, Outcome.COULD_NOT_RUN: 2, Outcome.FAIL: 3}


class Comparator(models.TextChoices):
    AT_LEAST = "ge", "at least"
    AT_MOST = "le", "at most"
    EQUAL = "eq", "equal to"


class Problem(models.TextChoices):
    """A known problem a failed check points to (Finding.problem, Suggestion.problem); each has its advice in
    apps.deployments.suggestions.ADVICE."""

    XID79 = "xid79", "GPU fallen off the bus (XID 79)"
    GPU_MISSING = "gpu_missing", "GPU missing"
    GPU_MODEL = "gpu_model", "GPU model differs from the inventory"
    HBM_LOW = "hbm_low", "Low HBM bandwidth"
    NVLINK = "nvlink", "NVLink down or slow"
    PCIE_DOWNTRAINED = "pcie_downtrained", "PCIe link downtrained"
    ECC = "ecc", "Uncorrectable ECC / row remap pending"
    FIRMWARE_DRIFT = "firmware_drift", "Firmware not at the baseline"
    NIC_DOWN = "nic_down", "NIC link down"
    NIC_SPEED = "nic_speed", "NIC at the wrong speed"
    MTU = "mtu", "MTU mismatch"
    RSS = "rss", "RSS queues not as planned"
    PFC = "pfc", "PFC off on the RDMA priority"
    ECN = "ecn", "ECN off for RoCE"
    PTP = "ptp", "Clock not synchronised"
    VERSION_DRIFT = "version_drift", "Software version differs from the plan"
    CONFIG_MISSING = "config_missing", "Configuration file not in place"
    INVENTORY_MISMATCH = "inventory_mismatch", "Node differs from the inventory"
    TOPOLOGY = "topology", "Topology check failed"
    NCCL_SOCKET_IFNAME = "nccl_socket_ifname", "NCCL_SOCKET_IFNAME on a missing interface"
    NCCL_FAILURE = "nccl_failure", "NCCL all-reduce failed"
    NCCL_SLOW = "nccl_slow", "NCCL bus bandwidth low"
    CHECKPOINT_MOUNT = "checkpoint_mount", "Checkpoint storage not mounted"
    DISK_FULL = "disk_full", "Checkpoint storage nearly full"
    SLOW_LINK = "slow_link", "Slow node or link across nodes (NCCL sweep)"
    CLUSTER_NCCL_SLOW = "cluster_nccl_slow", "Multi-node NCCL bus bandwidth low"
    HPL_LOW = "hpl_low", "HPL-MxP below the reference"
    LINK_ERRORS = "link_errors", "CRC/symbol errors on a data NIC's link"


class SuggestionState(models.TextChoices):
    OPEN = "open", "Open"
    APPROVED = "approved", "Fix approved"
    RESOLVED = "resolved", "Resolved"
    DISMISSED = "dismissed", "Dismissed"


SUGGESTION_STATE_COLOURS = {
    SuggestionState.OPEN: "red",
    SuggestionState.APPROVED: "blue",
    SuggestionState.RESOLVED: "green",
    SuggestionState.DISMISSED: "black",
}


class ApprovalScope(models.TextChoices):
    PLAN = "plan", "The plan"
    STEP = "step", "A disruptive step"
    FIX = "fix", "A suggested fix"


class ClusterCheck(models.TextChoices):
    """The checks of phase 5, cluster acceptance, in the order they run (each a benchmark run of apps.benchmarks)."""

    NCCL = "cluster-nccl", "Multi-node NCCL all_reduce"
    SWEEP = "cluster-sweep", "Slow node or link (NCCL sweep)"
    HPL = "cluster-hpl", "HPL-MxP"


class ClusterCheckStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"


CLUSTER_PENDING = frozenset({ClusterCheckStatus.QUEUED, ClusterCheckStatus.RUNNING})
