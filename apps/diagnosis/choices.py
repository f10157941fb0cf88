"""The problems triage recognises, each with a label, a one-line explanation and the runbook to run next.

Keys are the rules' problem keys (``apps.parsers.triage.PROBLEMS``); a test holds the two lists equal.
"""

from dataclasses import dataclass

from django.db import models


class Problem(models.TextChoices):
    NCCL_WATCHDOG_TIMEOUT = "nccl_watchdog_timeout", "NCCL collective timed out"
    COLLECTIVE_NOT_JOINED = "collective_not_joined", "Ranks missing from a collective"
    NCCL_REMOTE_ERROR = "nccl_remote_error", "NCCL peer exited or connection lost"
    NCCL_IB_ERROR = "nccl_ib_error", "InfiniBand / RoCE error"
    NCCL_SOCKET_ERROR = "nccl_socket_error", "NCCL socket / bootstrap connect failed"
    NCCL_INTERNAL_ERROR = "nccl_internal_error", "NCCL internal error"
    NCCL_SYSTEM_ERROR = "nccl_system_error", "NCCL system error"
    NCCL_INVALID_USAGE = "nccl_invalid_usage", "NCCL invalid usage"
    CUDA_ERROR = "cuda_error", "CUDA error"
    XID = "xid", "NVIDIA Xid event"
    GPU_FELL_OFF_BUS = "gpu_fell_off_bus", "GPU fell off the bus"
    GPU_FIRMWARE_FAILURE = "gpu_firmware_failure", "GPU firmware (GSP) not responding"
    GPU_RESET_REQUIRED = "gpu_reset_required", "GPU needs a reset"
    ECC_UNCORRECTABLE = "ecc_uncorrectable", "Uncorrectable ECC error"
    ROW_REMAP = "row_remap", "GPU memory row remap"
    PCIE_AER = "pcie_aer", "PCIe AER error"
    OOM = "oom", "Out of memory"
    DISK_FULL = "disk_full", "Disk full or quota exceeded"
    STORAGE_NOT_RESPONDING = "storage_not_responding", "Storage server not responding / task hung on I/O"
    CHECKPOINT_CORRUPT = "checkpoint_corrupt", "Corrupt checkpoint"
    CHECKPOINT_MISSING = "checkpoint_missing", "No checkpoint to resume from"
    CHECKPOINT_SAVE_FAILED = "checkpoint_save_failed", "Saving a checkpoint failed"
    TRAINING_CRASHED = "training_crashed", "Training stopped on an exception"
    WORKER_FAILED = "worker_failed", "Worker process failed"
    GPU_COUNT_MISMATCH = "gpu_count_mismatch", "Fewer GPUs than configured"
    NODE_DRAINED = "node_drained", "Node drained by the scheduler"
    SLURM_UNKILLABLE_STEP = "slurm_unkillable_step", "Unkillable job step (Slurm 'Kill task failed')"
    IB_PORT_DOWN = "ib_port_down", "InfiniBand / RoCE port down"
    GPU_CLOCKS_THROTTLED = "gpu_clocks_throttled", "GPU clocks held down (thermal / HW slowdown)"


@dataclass(frozen=True)
class Advice:
    explanation: str  # one line: what the problem means
    runbook: str  # the runbook to run next (its slug)
    next_step: str  # what that runbook starts with, in words


ADVICE: dict[str, Advice] = {
    Problem.NCCL_WATCHDOG_TIMEOUT: Advice(
        "A collective did not finish within the process group's timeout: some rank never reached it or hangs in it.",
        "nccl-timeout",
        "Find the rank that did not join (flight recorder, lowest SeqNum); check its node's storage and data loader "
        "first, then the fabric path (MTU 9000, PFC/ECN, link errors).",
    ),
    Problem.COLLECTIVE_NOT_JOINED: Advice(
        "The flight recorder shows ranks that never entered a collective the others are waiting in.",
        "nccl-timeout",
        "Read the missing rank's own log and its node's dmesg: a crash, a hang or a slow data loader stops it.",
    ),
    Problem.NCCL_REMOTE_ERROR: Advice(
        "A peer process exited or its connection closed or reset: this rank is the messenger, not the cause.",
        "nccl-peer-lost",
        "Find the peer that failed first: its log and its node's dmesg (OOM killer, Xid) explain the error here.",
    ),
    Problem.NCCL_IB_ERROR: Advice(
        "The InfiniBand/RoCE transport reported a failed work completion or could not set up a queue pair.",
        "fabric-link",
        "Check the named NIC and its link: port state and error counters (ibstat, ethtool -S), cable, switch port; "
        "status 12 (retry exceeded) means the peer stopped acknowledging.",
    ),
    Problem.NCCL_SOCKET_ERROR: Advice(
        "NCCL could not open a TCP connection (bootstrap or socket transport) or found no usable interface.",
        "nccl-bootstrap",
        "Check NCCL_SOCKET_IFNAME against the node's interfaces, the route and firewall to the peer, and that the "
        "peer is up.",
    ),
    Problem.NCCL_INTERNAL_ERROR: Advice(
        "NCCL failed an internal check; in the field these are most often connectivity, named by 'Last error'.",
        "nccl-connectivity",
        "Read NCCL's 'Last error' line, then run the fabric checks: interfaces, MTU, IB/RoCE port state.",
    ),
    Problem.NCCL_SYSTEM_ERROR: Advice(
        "A system call or external library NCCL uses failed (shared memory, sockets, memory locking).",
        "nccl-system",
        "Check /dev/shm size, memlock and open-file limits in the container, and the NIC driver; aws-ofi-nccl's "
        "'Unable to register memory … RC: 12' is ENOMEM: set the locked-memory limit to unlimited (ulimit -l, the "
        "container's --ulimit memlock=-1, Slurm's PropagateResourceLimits) and check the EFA/libfabric version.",
    ),
    Problem.NCCL_INVALID_USAGE: Advice(
        "The application called NCCL wrongly (mismatched counts, devices or ranks).",
        "application",
        "Fix the application: compare the collective's arguments across ranks.",
    ),
    Problem.CUDA_ERROR: Advice(
        "A CUDA call or kernel failed (illegal address, launch failure, device not initialised).",
        "gpu-health",
        "Look for an Xid on the same node and GPU (dmesg) and run DCGM diagnostics; without an Xid an illegal "
        "address is usually the application.",
    ),
    Problem.XID: Advice(
        "The NVIDIA driver logged an Xid event; its number says what failed (NVIDIA's Xid catalogue).",
        "gpu-health",
        "Follow the Xid's action; repeated Xids on one GPU mean it leaves service.",
    ),
    Problem.GPU_FELL_OFF_BUS: Advice(
        "The GPU stopped answering on PCIe (Xid 79): the driver cannot reach it.",
        "gpu-lost",
        "Drain the node, collect nvidia-bug-report, power-cycle it; check PCIe, power and cooling; RMA if it recurs.",
    ),
    Problem.GPU_FIRMWARE_FAILURE: Advice(
        "The GPU's firmware (GSP) stopped answering the driver (heartbeat or RPC timeout) or the adapter failed to "
        "initialise; many drivers print no Xid for it, and every CUDA call on that GPU then hangs or fails.",
        "gpu-lost",
        "Drain the node and collect nvidia-bug-report; reset the GPU (nvidia-smi -r) or reboot, then check that "
        "nvidia-smi -q lists it; if it recurs, compare the driver and GSP firmware with NVIDIA's known issues "
        "(disabling GSP with NVreg_EnableGpuFirmware=0 is possible only on pre-Blackwell GPUs) and RMA the GPU.",
    ),
    Problem.GPU_RESET_REQUIRED: Advice(
        "The driver returned NV_ERR_RESET_REQUIRED: after an unrecoverable error it refuses new work on the GPU, and "
        "CUDA reports the device busy or unavailable until the GPU is reset.",
        "gpu-lost",
        "Find the earlier error in dmesg (an Xid, a GSP timeout); drain the node, stop the processes on the GPU, "
        "reset it (nvidia-smi -r -i <gpu>) or reboot, then run DCGM diagnostics before returning it to service.",
    ),
    Problem.ECC_UNCORRECTABLE: Advice(
        "GPU memory returned data that ECC could not correct.",
        "gpu-memory",
        "Drain and reset the GPU so the page is retired or the row remapped; check nvidia-smi -q -d ECC,ROW_REMAPPER.",
    ),
    Problem.ROW_REMAP: Advice(
        "GPU memory rows were marked for remapping after ECC errors (or remapping failed).",
        "gpu-memory",
        "Reset the GPU when it is idle to apply the remap; a failed remap keeps the GPU out of service (RMA).",
    ),
    Problem.PCIE_AER: Advice(
        "The PCIe Advanced Error Reporting of a device or root port logged errors.",
        "pcie-link",
        "Check the link (lspci -vv speed and width, AER counters) and reseat the device or riser; fatal errors take "
        "the GPU off the bus.",
    ),
    Problem.OOM: Advice(
        "GPU memory or host memory ran out (the CUDA allocator or the kernel's OOM killer).",
        "memory-pressure",
        "GPU: lower the batch or shard/offload more; host: find the killed process in dmesg and the node's memory use.",
    ),
    Problem.DISK_FULL: Advice(
        "A write failed because the file system is full or the quota is exhausted.",
        "storage-capacity",
        "Free or grow the checkpoint file system, check quotas, then resume from the newest valid checkpoint.",
    ),
    Problem.STORAGE_NOT_RESPONDING: Advice(
        "A storage server (NFS, Lustre) stopped answering, or a task waited on I/O past the hung-task timeout.",
        "nccl-timeout",
        "Check the named server and the node's mount (findmnt, /proc/pressure/io): ranks reading from it hang and "
        "their peers time out in NCCL (runbook 1's storage branch).",
    ),
    Problem.CHECKPOINT_CORRUPT: Advice(
        "A checkpoint could not be read: the file is truncated or corrupt.",
        "checkpoint-recovery",
        "Verify the checkpoint files and resume from the newest one that loads; check the storage that wrote it.",
    ),
    Problem.CHECKPOINT_MISSING: Advice(
        "The job found no checkpoint to resume from and starts from scratch.",
        "checkpoint-recovery",
        "Stop it before it overwrites anything; point it at the checkpoint directory or its tracker file.",
    ),
    Problem.CHECKPOINT_SAVE_FAILED: Advice(
        "An exception was raised while a checkpoint was being saved.",
        "storage-capacity",
        "Check space, quota and health of the checkpoint storage; the exception line names the cause.",
    ),
    Problem.TRAINING_CRASHED: Advice(
        "The training framework reports that training stopped on an exception.",
        "training-log",
        "Read the traceback that follows in the full log and triage it.",
    ),
    Problem.WORKER_FAILED: Advice(
        "The launcher (torchrun, DeepSpeed) reports a worker process that failed; the root cause rank failed first.",
        "worker-exit",
        "Start with the root-cause rank's log and its node's dmesg; exit code -9 is SIGKILL (OOM killer or scheduler).",
    ),
    Problem.GPU_COUNT_MISMATCH: Advice(
        "The scheduler sees fewer GPUs on the node than are configured.",
        "gpu-lost",
        "Compare nvidia-smi -L with the configuration; look for Xid 79 or probe failures in dmesg and MIG changes.",
    ),
    Problem.NODE_DRAINED: Advice(
        "The scheduler drained the node: no new jobs start on it.",
        "scheduler-node",
        "Read the drain reason, fix it, then resume the node (scontrol update nodename=… state=resume).",
    ),
    Problem.SLURM_UNKILLABLE_STEP: Advice(
        "A job step's processes did not end after SIGKILL within UnkillableStepTimeout (usually stuck in the kernel "
        "on I/O or on a GPU), so slurmd gives up and Slurm drains the node with 'Kill task failed'.",
        "scheduler-node",
        "On the node, find the processes left in state D (ps -eo pid,stat,wchan,cmd) and what they wait on: a hung "
        "mount (NFS/Lustre) or a GPU (dmesg Xid); clear that, then resume the node (scontrol update nodename=… "
        "state=resume); raise UnkillableStepTimeout only if the processes do end, just slowly.",
    ),
    Problem.IB_PORT_DOWN: Advice(
        "An InfiniBand/RoCE port is not up: state Down, or physical state Polling (no link partner) or Disabled; "
        "NCCL then loses that rail or cannot connect over it.",
        "fabric-link",
        "Polling: reseat or replace the cable/transceiver and check the switch port; Disabled: enable the port "
        "(switch, SM or mlxconfig); Down with LinkUp: check the subnet manager (sminfo); confirm with ibstat and the "
        "port's error counters, then rerun the job's fabric check.",
    ),
    Problem.GPU_CLOCKS_THROTTLED: Advice(
        "The GPU's clocks are held down by heat, a HW slowdown signal or the PSU's power brake: it falls behind and "
        "every rank of a job waits for it.",
        "gpu-utilisation",
        "Sample the job's GPUs (utilisation, SM clocks, clocks-event reasons) to find the GPUs the others wait for, "
        "then fix their cooling or power.",
    ),
}


# --- incidents ---------------------------------------------------------------------------------------------------


class IncidentState(models.TextChoices):
    OPEN = "open", "Open"
    INVESTIGATING = "investigating", "Investigating"
    CONCLUDED = "concluded", "Cause found"
    FIXING = "fixing", "Fix running"
    VERIFYING = "verifying", "Re-checking"
    RESOLVED = "resolved", "Resolved"
    UNRESOLVED = "unresolved", "Not resolved"


INCIDENT_ACTIVE = (
    IncidentState.OPEN,
    IncidentState.INVESTIGATING,
    IncidentState.CONCLUDED,
    IncidentState.FIXING,
    IncidentState.VERIFYING,
)
# Not resolved: the active ones and those a runbook left unresolved (still wrong, though nothing is running on them).
INCIDENT_UNRESOLVED = (*INCIDENT_ACTIVE, IncidentState.UNRESOLVED)
INCIDENT_STATE_COLOURS = {
    IncidentState.OPEN: "grey",
    IncidentState.INVESTIGATING: "blue",
    IncidentState.CONCLUDED: "orange",
    IncidentState.FIXING: "blue",
    IncidentState.VERIFYING: "blue",
    IncidentState.RESOLVED: "green",
    IncidentState.UNRESOLVED: "red",
}


class Cause(models.TextChoices):
    """What the runbooks weigh, most specific first: runbook 1 (NCCL timeout / hang), runbook 3, then runbook 2."""

    PFC_OFF = "pfc_off", "PFC off on the RDMA priority"
    MTU_MISMATCH = "mtu_mismatch", "MTU mismatch on a data NIC"
    LINK_DOWN = "link_down", "Data NIC link down"
    GPU_LOST = "gpu_lost", "GPU lost (Xid 79)"
    STORAGE_OR_LOADER = "storage_or_loader", "Storage or data loader stall"  # before the branch had checks
    STORAGE_SLOW = "storage_slow", "Storage slow or not responding"
    # Runbook 3, training interrupted:
    CHECKPOINT_DISK_FULL = "checkpoint_disk_full", "Checkpoint volume full"
    CHECKPOINT_CORRUPT = "checkpoint_corrupt", "Newest checkpoint corrupt or incomplete"
    BAD_NODE = "bad_node", "A node's GPU failed (Xid / ECC)"
    WORKER_CRASH = "worker_crash", "Worker crashed (no infrastructure fault found)"
    # Runbook 2, GPU utilisation fluctuating:
    GPU_POWER_CAPPED = "gpu_power_capped", "GPU power-capped below its default limit"
    GPU_THERMAL = "gpu_thermal", "GPU thermal or HW slowdown"
    GPU_CLOCKS_CAPPED = "gpu_clocks_capped", "GPU held by application clocks"
    CO_LOCATED_TRAINER = "co_located_trainer", "Second trainer on a node (no anti-affinity)"
    DATALOADER_STALL = "dataloader_stall", "Data loader starves the GPUs"


RUNBOOK_CAUSES = {
    "nccl-timeout": (
        Cause.PFC_OFF,
        Cause.MTU_MISMATCH,
        Cause.LINK_DOWN,
        Cause.GPU_LOST,
        # the storage / data-loader branch, when the network checks ran clean:
        Cause.STORAGE_SLOW,
        Cause.CHECKPOINT_DISK_FULL,
        Cause.DATALOADER_STALL,
    ),
    "training-interrupted": (
        Cause.CHECKPOINT_DISK_FULL,
        Cause.CHECKPOINT_CORRUPT,
        Cause.BAD_NODE,
        Cause.WORKER_CRASH,
    ),
    "gpu-utilisation": (
        Cause.GPU_POWER_CAPPED,
        Cause.GPU_THERMAL,
        Cause.GPU_CLOCKS_CAPPED,
        Cause.CO_LOCATED_TRAINER,
        Cause.DATALOADER_STALL,
    ),
}


class EvidenceVerdict(models.TextChoices):
    """What a piece of evidence says about the network path: it shows a fault, shows health, or only informs."""

    FAULT = "fault", "Shows a fault"
    HEALTHY = "healthy", "Shows health"
    INFO = "info", "Informs"
    COULD_NOT_RUN = "could_not_run", "Could not run"


class RemediationState(models.TextChoices):
    PROPOSED = "proposed", "Waiting for approval"
    APPROVED = "approved", "Approved, running"
    APPLIED = "applied", "Applied, re-checking"
    FAILED = "failed", "Fix failed"
    VERIFIED = "verified", "Verified: symptom gone"
    INEFFECTIVE = "ineffective", "Applied, symptom still there"
