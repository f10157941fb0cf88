"""The demo cluster's workloads: an inference service on gpu001-gpu004 and a 16-node pre-training job on
gpu005-gpu020, the rest idle. Loaded after the inventory's demo (by `serve` and `make up`); idempotent: an existing
workload of the same name is left as it is."""

from django.db import transaction
from django.utils import timezone

from apps.inventory.choices import StorageTierKind
from apps.inventory.demo import compute_hostname
from apps.inventory.models import Node, StorageTier
from apps.workloads.choices import Framework, Launcher, ServiceState, TrainingState, WorkloadClass
from apps.workloads.models import InferenceService, TrainingJob
from apps.workloads.services import set_training_nodes

SERVICE_NODES = [compute_hostname(number) for number in range(1, 5)]
TRAINING_NODES = [compute_hostname(number) for number in range(5, 21)]
# Llama-3.1-70B in BF16 with tensor parallelism 8: ~2,500 generated tokens/s per H200 node at moderate batch sizes.
DESIGN_TOKENS_PER_NODE = 2500


@transaction.atomic
def load_workloads() -> dict[str, int]:
    """Add the demo workloads whose nodes exist; returns how many of each kind were created."""
    created = {"inference services": 0, "training jobs": 0}
    nodes = {node.hostname: node for node in Node.objects.filter(hostname__in=SERVICE_NODES + TRAINING_NODES)}
    serving = [nodes[name] for name in SERVICE_NODES if name in nodes]
    if serving and not InferenceService.objects.filter(name="chat-llama-70b").exists():
        service = InferenceService.objects.create(
            name="chat-llama-70b",
            model="meta-llama/Llama-3.1-70B-Instruct",
            endpoint="http://chat-llama-70b.demo.rackpilot:8000/v1",
            design_tokens_per_second=DESIGN_TOKENS_PER_NODE * len(serving),
            latency_target_ms=100,
            state=ServiceState.SERVING,
            workload_class=WorkloadClass.CRITICAL,
        )
        service.nodes.set(serving)
        created["inference services"] += 1
    training = [nodes[name] for name in TRAINING_NODES if name in nodes]
    if training and not TrainingJob.objects.filter(name="llama-pretrain").exists():
        job = TrainingJob.objects.create(
            name="llama-pretrain",
            framework=Framework.PYTORCH,
            launcher=Launcher.TORCHRUN,
            ranks_per_node=8,
            checkpoint_dir="/shared/ckpt/llama-pretrain",
            checkpoint_tier=StorageTier.objects.filter(kind=StorageTierKind.WARM).first(),
            checkpoint_interval_steps=1000,
            log_path="/var/log/train/llama-pretrain.log",
            state=TrainingState.RUNNING,
            started_at=timezone.now(),  # running, so started: the simulator runs it (and writes its log) from then
        )
        set_training_nodes(job=job, nodes=training)
        created["training jobs"] += 1
    return created
