"""The demo runs on the simulator in both wirings: its nodes are loaded recording `sim`, and work that names no
transport goes where its nodes say, even where the install's default is ssh (the services wiring). Real nodes,
and demo nodes an operator points at real machines, keep the install's default."""

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.inventory.models import Node
from apps.jobs.services import TargetSpec, create_job
from apps.monitoring import progress
from apps.nodeexec.transports import TRANSPORT_NAMES, default_transport
from apps.workloads.choices import TrainingState
from apps.workloads.models import TrainingJob, TrainingJobNode


@pytest.fixture
def services_wiring(settings):
    settings.RACKPILOT_JOB_DEFAULT_TRANSPORT = "ssh"
    settings.RACKPILOT_JOB_TRANSPORTS = ["ssh", "local", "sim"]
    return settings


def _nodes(*transports):
    return [SimpleNamespace(transport=transport) for transport in transports]


@pytest.mark.parametrize(
    ("recorded", "offered", "chosen"),
    [
        (("sim", "sim"), TRANSPORT_NAMES, "sim"),  # the demo's nodes
        (("", ""), TRANSPORT_NAMES, "ssh"),  # real nodes: the install's
        (("sim", ""), TRANSPORT_NAMES, "ssh"),  # a mix: the install's
        (("sim",), ("ssh", "local"), "ssh"),  # a kind that reads real nodes only
        ((), TRANSPORT_NAMES, "ssh"),
    ],
)
def test_the_nodes_own_transport_when_they_agree_and_it_is_offered(services_wiring, recorded, offered, chosen):
    assert default_transport(offered=offered, nodes=_nodes(*recorded)) == chosen


def test_a_transport_the_install_does_not_allow_is_not_taken_from_the_nodes(services_wiring):
    services_wiring.RACKPILOT_JOB_TRANSPORTS = ["ssh"]

    assert default_transport(nodes=_nodes("sim")) == "ssh"


@pytest.mark.django_db
def test_the_demo_is_loaded_on_the_simulator(demo_cluster):
    assert set(Node.objects.values_list("transport", flat=True)) == {"sim"}


@pytest.fixture
def demo_training_job(demo_cluster):
    job = TrainingJob.objects.create(
        name="llm-pretrain",
        ranks_per_node=8,
        log_path="/var/log/train/llm-pretrain.log",
        state=TrainingState.RUNNING,
        started_at=timezone.now() - timedelta(minutes=30),
    )
    TrainingJobNode.objects.create(job=job, node=Node.objects.get(hostname="gpu001"), node_rank=0)
    return job


@pytest.mark.django_db
def test_beats_reads_of_the_demo_go_to_the_simulator_in_the_services_wiring(services_wiring, demo_training_job):
    (read,) = progress.schedule_reads()

    assert read.transport == "sim"


@pytest.mark.django_db
def test_a_demo_node_pointed_at_a_real_machine_is_reached_over_ssh(services_wiring, demo_training_job, admin, api_as):
    node = Node.objects.get(hostname="gpu001")
    response = api_as(admin).patch(reverse("api:node-detail", args=[node.public_id]), {"transport": ""}, format="json")
    assert response.status_code == 200, response.content[:300]

    (read,) = progress.schedule_reads()

    assert read.transport == "ssh"


@pytest.mark.django_db
def test_a_job_on_real_nodes_keeps_the_install_default(services_wiring, demo_cluster):
    Node.objects.filter(hostname="gpu002").update(transport="")

    job = create_job(kind="sleep", targets=TargetSpec(nodes=("gpu002",)), parameters={"seconds": 1}, queue=False)

    assert job.transport == "ssh"
