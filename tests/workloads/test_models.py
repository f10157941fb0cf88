import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError

from apps.workloads.models import InferenceService, TrainingJob, TrainingJobNode
from tests.factories import make_node

pytestmark = pytest.mark.django_db


def test_rank_map_follows_node_rank_not_insertion_order():
    job = TrainingJob.objects.create(name="llama-pretrain", ranks_per_node=2)
    second, first = make_node(hostname="gpu002"), make_node(hostname="gpu001")
    TrainingJobNode.objects.create(job=job, node=second, node_rank=1)
    TrainingJobNode.objects.create(job=job, node=first, node_rank=0)

    assert [(rank, node.hostname, gpu) for rank, node, gpu in job.rank_map()] == [
        (0, "gpu001", 0),
        (1, "gpu001", 1),
        (2, "gpu002", 0),
        (3, "gpu002", 1),
    ]
    assert job.world_size == 4


def test_a_node_holds_one_place_in_a_job():
    job = TrainingJob.objects.create(name="llama-pretrain")
    node = make_node()
    TrainingJobNode.objects.create(job=job, node=node, node_rank=0)
    with pytest.raises(IntegrityError):
        TrainingJobNode.objects.create(job=job, node=node, node_rank=1)


def test_checkpoint_dir_must_be_an_absolute_path():
    job = TrainingJob(name="bad", checkpoint_dir="ckpt; rm -rf /")
    with pytest.raises(ValidationError) as error:
        job.full_clean()
    assert "checkpoint_dir" in error.value.message_dict


def test_inference_service_needs_a_design_throughput():
    service = InferenceService(name="chat", model="meta-llama/Llama-3.1-70B", design_tokens_per_second=0)
    with pytest.raises(ValidationError) as error:
        service.full_clean()
    assert "design_tokens_per_second" in error.value.message_dict
