"""Workload services: a training job's nodes in node-rank order, and the queries pages and the API share."""

from django.db import transaction
from django.utils import timezone

from apps.inventory.models import Node
from apps.workloads.models import InferenceService, TrainingJob, TrainingJobNode


def set_training_nodes(*, job: TrainingJob, nodes: list[Node]) -> None:
    """Give the job these nodes, node rank by node rank (the first node is rank 0, as torchrun's --node-rank)."""
    if len({node.pk for node in nodes}) != len(nodes):
        raise ValueError("a node appears twice; each node holds one place in a job")
    with transaction.atomic():
        job.members.all().delete()
        TrainingJobNode.objects.bulk_create(
            [TrainingJobNode(job=job, node=node, node_rank=rank) for rank, node in enumerate(nodes)]
        )


def move_training_job(*, job: TrainingJob, nodes: list[Node], reason: str) -> None:
    """Run the job on these nodes from now on (a recovery that excluded a bad node), keeping the earlier node list
    in its placements (the simulator replays the run's history on the nodes it ran on then)."""
    before = [member.node.hostname for member in job.members.select_related("node").order_by("node_rank")]
    if before == [node.hostname for node in nodes]:
        return
    with transaction.atomic():
        job.placements = [*job.placements, {"hosts": before, "until": timezone.now().isoformat(), "reason": reason}]
        job.save(update_fields=["placements", "updated"])
        set_training_nodes(job=job, nodes=nodes)


def training_jobs():
    return TrainingJob.objects.select_related("checkpoint_tier").prefetch_related("members__node")


def inference_services():
    return InferenceService.objects.prefetch_related("nodes")


def workloads_on(*, node: Node) -> dict:
    """What runs on a node: its training jobs and inference services (all states)."""
    return {
        "training_jobs": list(TrainingJob.objects.filter(members__node=node).distinct()),
        "inference_services": list(InferenceService.objects.filter(nodes=node).distinct()),
    }
