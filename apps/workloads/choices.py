from django.db import models


class Framework(models.TextChoices):
    PYTORCH = "pytorch", "PyTorch"
    MEGATRON = "megatron", "Megatron-LM"
    DEEPSPEED = "deepspeed", "DeepSpeed"
    JAX = "jax", "JAX"
    HOROVOD = "horovod", "Horovod"


class Launcher(models.TextChoices):
    TORCHRUN = "torchrun", "torchrun"
    MPIRUN = "mpirun", "mpirun"
    SLURM = "slurm", "Slurm"
    KUBERNETES = "kubernetes", "Kubernetes"


class RecoveryPolicy(models.TextChoices):
    """What Rackpilot may do when the job is interrupted: propose the recovery, or run it at once (bounded)."""

    MANUAL = "manual", "Manual: an operator approves the recovery"
    AUTOMATIC = "automatic", "Automatic: recover at once, with bounded retries"


class TrainingState(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    INTERRUPTED = "interrupted", "Interrupted"
    FAILED = "failed", "Failed"
    COMPLETED = "completed", "Completed"


class ServiceState(models.TextChoices):
    SERVING = "serving", "Serving"
    DEGRADED = "degraded", "Degraded"
    STOPPED = "stopped", "Stopped"


class WorkloadClass(models.TextChoices):
    """How much a workload may be disturbed: critical work never lands on spot capacity (the cost policies read it)."""

    CRITICAL = "critical", "Critical"
    STANDARD = "standard", "Standard"
    PREEMPTIBLE = "preemptible", "Preemptible (spot)"


TRAINING_STATE_COLOURS = {
    TrainingState.PENDING: "grey",
    TrainingState.RUNNING: "green",
    TrainingState.INTERRUPTED: "orange",
    TrainingState.FAILED: "red",
    TrainingState.COMPLETED: "blue",
}
SERVICE_STATE_COLOURS = {ServiceState.SERVING: "green", ServiceState.DEGRADED: "orange", ServiceState.STOPPED: "grey"}
# Workloads that keep their nodes' GPUs busy (the simulator loads their GPUs; telemetry attributes energy to them).
TRAINING_ACTIVE = [TrainingState.RUNNING]
SERVICE_ACTIVE = [ServiceState.SERVING, ServiceState.DEGRADED]
