"""The schedulers' own node states as health events: a node Slurm shows drained or down while Rackpilot has it in
service is a `scheduler_drained` event on the node (source `scheduler`, Slurm's reason), folded while the answer
stays the same, made worse when the node goes down, and cleared when Slurm shows it back in service; a node Rackpilot
drained itself makes none."""

import pytest
from django.utils import timezone

from apps.health.choices import ClearedBy, Severity, Source
from apps.health.models import HealthEvent
from apps.inventory.models import Node
from apps.jobs.choices import JobStatus
from apps.schedulers import services
from apps.simulator.services import run_command

pytestmark = pytest.mark.django_db(transaction=True)


def scontrol(*words: str) -> None:
    """An administrator's own scontrol on the controller, not through Rackpilot."""
    answer = run_command(node=services.scheduler_controller(), argv=["scontrol", "update", *words])
    assert answer.exit_code == 0, answer.stderr


def readback(run_shards):
    job = run_shards(services.start_readback(transport="sim", scheduler="slurm"))
    assert job.status == JobStatus.SUCCEEDED, list(job.events.values_list("message", flat=True))
    return job


def test_a_node_drained_then_down_in_slurm_is_one_event_cleared_when_slurm_resumes_it(demo_cluster, run_shards):
    scontrol("NodeName=gpu005", "State=DRAIN", "Reason=ECC storm on GPU 2")
    readback(run_shards)

    [event] = HealthEvent.objects.all()
    assert (event.node.hostname, event.component_type, event.kind) == ("gpu005", "node", "scheduler_drained")
    assert (event.source, event.severity) == (Source.SCHEDULER, Severity.MINOR)
    assert "ECC storm on GPU 2" in event.summary and event.evidence[0]["reason"] == "ECC storm on GPU 2"
    assert event.evidence[0]["state"] == "IDLE+DRAIN" and event.evidence[0]["reason_by"] == "root"

    readback(run_shards)  # the same answer: folded, counted once
    event.refresh_from_db()
    assert event.count == 1 and event.is_open

    scontrol("NodeName=gpu005", "State=DOWN", "Reason=PSU 2 failed")
    readback(run_shards)
    event.refresh_from_db()
    assert (event.count, event.severity, HealthEvent.objects.count()) == (2, Severity.MAJOR, 1)
    assert event.evidence[-1]["reason"] == "PSU 2 failed"

    scontrol("NodeName=gpu005", "State=RESUME")
    job = readback(run_shards)
    event.refresh_from_db()
    assert not event.is_open and event.cleared_by == ClearedBy.VALIDATION
    assert event.clear_reason.startswith("the scheduler shows the node in service again")
    assert event.clear_evidence["job"] == str(job.public_id)


def test_a_node_rackpilot_drained_makes_no_scheduler_event(demo_cluster, run_shards):
    Node.objects.filter(hostname="gpu006").update(drained_at=timezone.now(), drain_reason="rackpilot xid79: GPU 3")
    scontrol("NodeName=gpu006", "State=DRAIN", "Reason=rackpilot xid79 GPU 3")
    readback(run_shards)
    assert not HealthEvent.objects.exists()


def test_a_node_powered_off_through_its_bmc_makes_no_scheduler_event(demo_cluster, run_shards):
    """Slurm marks a node it cannot reach down (not responding): for a node its BMC reads powered off (a leak's trays,
    an operator's power-off) that is what off looks like, not a new fault per node."""
    Node.objects.filter(hostname="gpu006").update(power_state="off", power_state_since=timezone.now())
    scontrol("NodeName=gpu006", "State=DOWN", "Reason=Not responding")
    readback(run_shards)
    assert not HealthEvent.objects.exists()
