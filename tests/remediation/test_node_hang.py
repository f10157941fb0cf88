"""A node whose OS hung, end to end on the simulator: the 5-minute kernel-log read cannot reach it (the connection
times out) and records `node_unreachable` once, folding repeats; the shipped "Node not answering" policy would
power-cycle it in shadow, and in "on" starts the `bmc-power` job, which brings the node back; the next read reaches it
and clears the event by validation; an XID 79 on the same node then goes its own quarantine way. What a connection
failure is, and is not, for the producer."""

import datetime as dt

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from apps.health.choices import ClearedBy, Severity, Source
from apps.health.models import HealthEvent
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node
from apps.jobs.choices import JobStatus, StepStatus
from apps.jobs.models import Job
from apps.monitoring import kernel_log, reachability
from apps.monitoring.bmc import logins
from apps.nodeexec.base import CommandResult
from apps.remediation import defaults, services
from apps.remediation.choices import Action, Mode, Outcome
from apps.remediation.models import RemediationDecision, RemediationPolicy
from apps.simulator import services as simulator
from apps.simulator.models import SimFault

pytestmark = pytest.mark.django_db(transaction=True)  # a job's events are written outside the test's transaction

TIMED_OUT = "ssh: connect to host gpu001 port 22: Connection timed out"
NO_ROUTE = b"ssh: connect to host gpu001 port 22: No route to host\n"
REFUSED = b"ssh: connect to host gpu001 port 22: Connection refused\n"
NOT_PERMITTED = b"dmesg: read kernel buffer failed: Operation not permitted\n"


@pytest.fixture
def fleet(clock, transactional_db, on_the_simulator, settings):
    settings.RACKPILOT_SIM_REBOOT_SECONDS = 0  # a simulated boot is immediate: the node answers at once after it
    load_cluster(ClusterShape(compute_nodes=2, nodes_per_rack=2, management_nodes=0))
    defaults.ship_defaults(RemediationPolicy)  # a transactional test's flush emptied what the migration shipped
    node = Node.objects.get(hostname="gpu001")
    logins.save_bmc(
        node=node, address=node.bmc_address, protocol="ipmi", port=None, user=django_settings.RACKPILOT_SIM_BMC_USER,
        verify_tls=True, password=django_settings.RACKPILOT_SIM_BMC_PASSWORD,
    )  # fmt: skip
    return node


def _read(run_shards) -> Job:
    return run_shards(kernel_log.schedule_read())


def _unreachable():
    return list(HealthEvent.objects.filter(kind="node_unreachable"))


def test_a_hung_node_is_recorded_once_power_cycled_through_its_bmc_and_cleared_when_it_answers(fleet, run_shards):
    node = fleet
    simulator.inject_fault(node=node, kind="node_hang")

    first = _read(run_shards)

    cell = first.steps.get(node=node)
    assert cell.status == StepStatus.FAILED and cell.summary == f"exit 255: {TIMED_OUT}"
    (event,) = _unreachable()
    assert (event.node, event.source, event.severity, event.component_type) == (
        node, Source.KERNEL_LOG, Severity.CRITICAL, "node"
    )  # fmt: skip
    assert event.evidence[0]["error"] == TIMED_OUT and event.evidence[0]["job"] == str(first.public_id)
    assert first.steps.get(node__hostname="gpu002").status == StepStatus.SUCCEEDED  # the other node answered

    second = _read(run_shards)

    (event,) = _unreachable()  # folded: one open event, seen twice
    assert event.is_open and event.count == 2 and event.evidence[-1]["job"] == str(second.public_id)

    policy = RemediationPolicy.objects.get(name="Node not answering")
    assert (policy.kind_pattern, policy.min_severity, policy.action, policy.mode) == (
        "node_unreachable", Severity.CRITICAL, Action.POWER_CYCLE, Mode.SHADOW
    )  # fmt: skip
    RemediationPolicy.objects.exclude(pk=policy.pk).delete()

    (shadow,) = services.evaluate(now=timezone.now(), transport="sim")

    assert shadow.outcome == Outcome.WOULD_ACT and "power-cycle gpu001 through its BMC" in shadow.reason
    assert not Job.objects.filter(kind="bmc-power").exists()

    RemediationDecision.objects.all().delete()
    RemediationPolicy.objects.filter(pk=policy.pk).update(mode=Mode.ON)
    (decision,) = services.evaluate(now=timezone.now(), transport="sim")

    assert decision.outcome == Outcome.ACTED, decision.reason
    power = Job.objects.get(public_id=decision.job_id)
    assert (power.kind, power.transport, power.parameters["action"]) == ("bmc-power", "sim", "cycle")
    power = run_shards(power)
    assert power.status == JobStatus.SUCCEEDED, power.steps.get().summary
    assert not SimFault.objects.filter(node=node, kind="node_hang").exists()  # the cycle ended the hang

    third = _read(run_shards)

    (event,) = _unreachable()
    assert not event.is_open and event.cleared_by == ClearedBy.VALIDATION
    assert event.clear_evidence["job"] == str(third.public_id)
    assert third.steps.get(node=node).status == StepStatus.SUCCEEDED


def test_a_node_that_answers_is_not_recorded(fleet, run_shards):
    _read(run_shards)

    assert not _unreachable()


@pytest.mark.parametrize(
    ("result", "silent", "answered"),
    [
        (CommandResult(exit_code=255, stderr=f"{TIMED_OUT}\n".encode()), True, False),
        (CommandResult(error="ssh to 10.0.0.5:22 failed: TimeoutError"), True, False),
        (CommandResult(error="ssh to 10.0.0.5:22 failed: Opening SSH connection timed out"), True, False),
        # Powered off through its BMC, or rebooting: meant, and the kernel answers a refusal; not recorded.
        (CommandResult(exit_code=255, stderr=NO_ROUTE), False, False),
        (CommandResult(exit_code=255, stderr=REFUSED), False, False),
        (CommandResult(error="ssh to 10.0.0.5:22 failed: [Errno 113] No route to host"), False, False),
        # A jump host that times out says nothing of the node behind it.
        (CommandResult(error="ssh to 10.0.0.5:22 through jump host bastion failed: TimeoutError"), False, False),
        # The command ran: the node answers, whatever dmesg said.
        (CommandResult(exit_code=1, stderr=NOT_PERMITTED), False, True),
        (CommandResult(exit_code=0, stdout=b""), False, True),
    ],
)
def test_only_a_connection_that_times_out_is_a_node_not_answering(result, silent, answered):
    assert (reachability.timed_out_line(result) is not None, reachability.reached(result)) == (silent, answered)


def test_a_hung_node_with_a_gpu_off_the_bus_comes_back_to_its_xid79_quarantine(fleet, run_shards):
    node = fleet
    simulator.inject_fault(node=node, kind="xid79", target="2")
    simulator.inject_fault(node=node, kind="node_hang")
    _read(run_shards)
    assert {event.kind for event in HealthEvent.objects.filter(node=node)} == {"node_unreachable"}
    RemediationPolicy.objects.filter(name="Node not answering").update(mode=Mode.ON)

    (cycle,) = services.evaluate(now=timezone.now(), transport="sim")
    run_shards(Job.objects.get(public_id=cycle.job_id))
    _read(run_shards)

    (unreachable,) = _unreachable()
    assert not unreachable.is_open  # back: it answers
    xid = HealthEvent.objects.get(node=node, kind="xid79")
    assert xid.is_open and xid.gpu.index == 2  # the cycle did not bring the GPU back: the kernel log says so
    # The next boot's driver logs the Xid as it loads, seconds after the boot: the evaluator's next minute sees it.
    (quarantine,) = services.evaluate(now=timezone.now() + dt.timedelta(minutes=1), transport="sim")
    assert (quarantine.event, quarantine.action, quarantine.outcome) == (xid, Action.QUARANTINE, Outcome.WOULD_ACT)
