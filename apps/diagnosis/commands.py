"""The catalogue commands the runbooks add (the others they run are the inventory's, discovery's and deployments')."""

from apps.deployments import commands as deployment_commands  # noqa: F401  (read-file, dmesg, set-mtu, set-qos)
from apps.nodeexec.catalogue import (
    CATALOGUE,
    CHECKPOINT_LOAD_SCRIPT,
    HOSTNAME,
    UTILISATION_SCRIPT,
    Command,
    Placeholder,
    register_command,
    register_placeholder,
)

# A training job's recovery: the checkpoint directories it may remove (never /, never .., always a step_N
# directory) and the relaunch's values; a Slurm resume (sbatch): the job's name and the nodes it runs on / must not
# run on. Registered before the commands that use them.
for _name, _placeholder in {
    "checkpoint_step_dir": Placeholder(
        r"/(?:[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}/){1,12}step_[0-9]{7,9}",
        "a checkpoint directory /…/step_NNNNNNN",
        slashes=True,
        roots="RACKPILOT_CHECKPOINT_DIRS",
    ),
    "step": Placeholder(r"[0-9]{1,9}", "a training step"),
    "node_rank": Placeholder(r"[0-9]{1,4}", "a node rank"),
    "checkpoint_dir": Placeholder(
        r"/(?:[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}/){0,12}[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}",
        "an absolute directory path",
        slashes=True,
        roots="RACKPILOT_CHECKPOINT_DIRS",
    ),
    "unit": Placeholder(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,80}", "a systemd unit name"),
    "rdzv_endpoint": Placeholder(rf"{HOSTNAME}:[0-9]{{1,5}}", "host:port"),
    "slurm_job": Placeholder(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", "a Slurm job name"),
    "node_list": Placeholder(rf"{HOSTNAME}(?:,{HOSTNAME}){{0,1023}}", "node names separated by commas"),
    "excluded_nodes": Placeholder(rf"{HOSTNAME}(?:,{HOSTNAME}){{0,1023}}", "node names separated by commas"),
}.items():
    register_placeholder(_name, _placeholder)

COMMANDS = (
    Command(
        "tail-log",
        ("tail", "-n", "{number}", "{log_file}"),
        "The last lines of a training job's launcher log (under RACKPILOT_TRAINING_LOG_DIRS).",
        placeholders=("number", "log_file"),
    ),
)
RECOVERY_COMMANDS = (
    Command(
        "df-path",
        ("df", "-P", "-B1", "{path}"),
        "Size, use and free space of the file system holding a path, in bytes.",
        placeholders=("path",),
    ),
    Command(
        "ls-dir", ("ls", "{checkpoint_path}"), "The names in a checkpoint directory.", placeholders=("checkpoint_path",)
    ),
    Command(
        "ls-all",
        ("ls", "-la", "{checkpoint_path}"),
        "Every file of a directory with its size (a checkpoint's shards and its .metadata marker).",
        placeholders=("checkpoint_path",),
    ),
    Command(
        "sha256-check",
        ("sha256sum", "-c", "{checkpoint_path}"),
        "Checks the files a checkpoint's hash manifest lists against their SHA-256.",
        placeholders=("checkpoint_path",),
    ),
    Command(
        "checkpoint-load",
        ("python3", "-c", CHECKPOINT_LOAD_SCRIPT, "{checkpoint_path}"),
        "Loads a PyTorch Distributed Checkpoint on the CPU (metadata and every tensor): does it load?",
        placeholders=("checkpoint_path",),
        timeout=1800,
    ),
    Command(
        "remove-checkpoint",
        ("rm", "-rf", "--", "{checkpoint_step_dir}"),
        "Removes one checkpoint directory (a step_N directory, nothing else) to free space.",
        placeholders=("checkpoint_step_dir",),
    ),
    Command(
        "resume-torchrun",
        (
            "systemd-run",
            "--unit",
            "{unit}",
            "--collect",
            "torchrun",
            "--nnodes",
            "{number}",
            "--nproc-per-node",
            "{gpus}",
            "--node-rank",
            "{node_rank}",
            "--rdzv-id",
            "{marker}",
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            "{rdzv_endpoint}",
            "{path}",
            "--load",
            "{checkpoint_dir}",
            "--ckpt-step",
            "{step}",
        ),
        "Relaunches a training job's node from a chosen checkpoint (torchrun under a transient systemd unit).",
        placeholders=(
            "unit",
            "number",
            "gpus",
            "node_rank",
            "marker",
            "rdzv_endpoint",
            "path",
            "checkpoint_dir",
            "step",
        ),
    ),
)
_SBATCH = (
    "sbatch",
    "--job-name",
    "{slurm_job}",
    "--nodes",
    "{number}",
    "--nodelist",
    "{node_list}",
    "--ntasks-per-node",
    "1",
    "--gpus-per-node",
    "{gpus}",
)
_SBATCH_PROGRAM = ("{path}", "--load", "{checkpoint_dir}", "--ckpt-step", "{step}")
# The resumes a scheduler runs, on its controller (apps/deployments/node_operations.scheduler_controller): Slurm
# gets a new batch job on the plan's nodes (the job's entrypoint is its batch script; sbatch hands it the
# checkpoint arguments), Kubernetes the Job manifest written to a file and applied (the transports give a command
# no standard input, so not `kubectl apply -f -`).
RESUME_COMMANDS = (
    Command(
        "resume-sbatch",
        (*_SBATCH, *_SBATCH_PROGRAM),
        "Submits a Slurm training job again on the given nodes, resuming from a chosen checkpoint.",
        placeholders=("slurm_job", "number", "node_list", "gpus", "path", "checkpoint_dir", "step"),
    ),
    Command(
        "resume-sbatch-excluding",
        (*_SBATCH, "--exclude", "{excluded_nodes}", *_SBATCH_PROGRAM),
        "Submits a Slurm training job again on the given nodes, never on the excluded ones, from a checkpoint.",
        placeholders=("slurm_job", "number", "node_list", "gpus", "excluded_nodes", "path", "checkpoint_dir", "step"),
    ),
    Command(
        "kubectl-apply",
        ("kubectl", "apply", "-f", "{path}"),
        "Creates or updates the Kubernetes objects of a manifest file (a training job's resume Job).",
        placeholders=("path",),
    ),
)
# Runbook 1's storage / data-loader branch (apps/diagnosis/storage_checks.py).
STORAGE_COMMANDS = (
    Command(
        "findmnt-list",
        ("findmnt", "-J", "--list", "-o", "TARGET,SOURCE,FSTYPE,OPTIONS"),
        "Every mount with its source (the NFS / Lustre server), type and options, as JSON.",
    ),
    Command(
        "ps-processes",
        ("ps", "-eo", "pid,ppid,stat,comm,args"),
        "Every process with its parent and state (the trainers and their DataLoader workers, D: waiting on I/O).",
    ),
)
UTILISATION_COMMANDS = (
    Command(
        "utilisation-series",
        ("sh", "-c", UTILISATION_SCRIPT, "rackpilot-utilisation", "{seconds}", "{interval_ms}"),
        "Samples every GPU's utilisation, SM clock, clocks-event reasons, power and limits every N ms for S seconds "
        "(nvidia-smi -lms), while the job runs.",
        placeholders=("seconds", "interval_ms"),
    ),
    Command(
        "kubectl-get-pods",
        ("kubectl", "get", "pods", "--all-namespaces", "-o", "wide"),
        "Every pod with the node it runs on (the scheduler's placement).",
    ),
    Command(
        "scontrol-show-jobs",
        ("scontrol", "show", "job", "-d"),
        "Every Slurm job with its node list, OverSubscribe and the CPUs and GPUs it holds on each node (the "
        "scheduler's placement).",
    ),
)
COMMANDS = COMMANDS + RECOVERY_COMMANDS + RESUME_COMMANDS + STORAGE_COMMANDS + UTILISATION_COMMANDS
for _command in COMMANDS:
    if _command.name not in CATALOGUE:
        register_command(_command)
