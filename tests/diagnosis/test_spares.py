"""A spare for a drained training node is a node of its SKU that nothing else needs: not one serving an inference
service (the demo's recovery took gpu001 from chat-llama-70b), nor one of a training job."""

from apps.diagnosis.kinds.training_interrupted import spares_for
from apps.workloads.demo import SERVICE_NODES, TRAINING_NODES, load_workloads
from apps.workloads.models import TrainingJob


def test_a_spare_is_never_a_node_serving_an_inference_service(demo_cluster):
    load_workloads()
    training = TrainingJob.objects.get(name="llama-pretrain")

    chosen = spares_for(training=training, bad_hosts=["gpu006"])

    assert set(chosen) == {"gpu006"}
    assert chosen["gpu006"] not in SERVICE_NODES + TRAINING_NODES
