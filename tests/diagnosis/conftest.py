"""A simulated training job on four demo nodes, running for two hours, and helpers to age faults and fixes.

Every test here runs on the clock it sets (tests/conftest.py, `clock`): the job's log, the faults' ages and the
services' `now` follow it, never the wall clock."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.inventory.models import Node
from apps.simulator import services as sim
from apps.simulator.models import SimChange, SimFault
from apps.workloads.choices import TrainingState
from apps.workloads.models import TrainingJob, TrainingJobNode

HOSTS = ("gpu001", "gpu002", "gpu003", "gpu004")
LOG = "/var/log/train/llm-pretrain.log"


@pytest.fixture(autouse=True)
def _on_the_test_clock(clock):
    """Before any row is stamped (autouse fixtures come first)."""


@pytest.fixture
def training_job(demo_cluster):
    job = TrainingJob.objects.create(
        name="llm-pretrain",
        ranks_per_node=8,
        checkpoint_dir="/checkpoints/llm-pretrain",
        checkpoint_interval_steps=200,
        log_path=LOG,
        state=TrainingState.RUNNING,
        started_at=timezone.now() - timedelta(hours=2),
    )
    for rank, hostname in enumerate(HOSTS):
        TrainingJobNode.objects.create(job=job, node=Node.objects.get(hostname=hostname), node_rank=rank)
    return job


@pytest.fixture
def inject():
    """inject(hostname, kind, target, minutes_ago=30): a fault that struck that long ago (the watchdog has fired)."""

    def make(hostname: str, kind: str, target: str = "", *, minutes_ago: float = 30, **parameters) -> SimFault:
        fault = sim.inject_fault(
            node=Node.objects.get(hostname=hostname), kind=kind, target=target, parameters=parameters
        )
        SimFault.objects.filter(pk=fault.pk).update(created=timezone.now() - timedelta(minutes=minutes_ago))
        return fault

    return make


@pytest.fixture
def age_changes():
    """age_changes(minutes): the changes commands made look that old (the job had time to restart after a fix)."""

    def age(minutes: float) -> None:
        SimChange.objects.update(updated=timezone.now() - timedelta(minutes=minutes))

    return age


@pytest.fixture
def run_phase(run_shards):
    """run_phase(incident, phase): run the newest job of that phase of the incident here, then reload it."""

    def run(incident, phase):
        job = incident.jobs.filter(parameters__phase=phase).order_by("-created").first()
        assert job is not None, f"no {phase} job was started"
        run_shards(job)
        incident.refresh_from_db()
        return job

    return run
