"""Remediation's out-of-band actions: a power-cycle policy starts the `bmc-power` job (by its kind name) and the
simulated BMC cycles the node; a node without a BMC login fails the decision, naming why; a GPU reset waits for the
node to be drained, then runs `nvidia-smi -r -i N` through the `gpu-reset` job. Both count for the breaker."""

import datetime as dt

import pytest
from django.conf import settings as django_settings

from apps.core.models import AuditEntry
from apps.health import services as health
from apps.health.choices import Severity, Source
from apps.inventory.models import Gpu, Node
from apps.inventory.services import drain_nodes
from apps.jobs.choices import JobStatus, StepStatus
from apps.jobs.models import Job
from apps.monitoring.bmc import logins
from apps.remediation import services
from apps.remediation.choices import TAKES_NODE_OUT, Action, Mode, Outcome
from apps.remediation.models import RemediationPolicy
from apps.simulator import services as simulator

pytestmark = pytest.mark.django_db(transaction=True)

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


def policy(**fields) -> RemediationPolicy:
    RemediationPolicy.objects.all().delete()
    values = {"name": "closed loop", "min_severity": Severity.MAJOR, "mode": Mode.ON}
    return RemediationPolicy.objects.create(**(values | fields))


def unreachable(node: Node):
    return health.record_event(
        component=node, source=Source.OPERATOR, kind="ssh_unreachable", severity=Severity.MAJOR,
        summary=f"{node.hostname} no longer answers SSH", at=NOW,
    )  # fmt: skip


def with_bmc(node: Node) -> None:
    logins.save_bmc(
        node=node, address=node.bmc_address, protocol="ipmi", port=None, user=django_settings.RACKPILOT_SIM_BMC_USER,
        verify_tls=True, password=django_settings.RACKPILOT_SIM_BMC_PASSWORD,
    )  # fmt: skip


def test_the_new_actions_count_for_the_breaker():
    assert {Action.POWER_CYCLE, Action.GPU_RESET} <= TAKES_NODE_OUT


def test_a_power_cycle_decision_starts_the_bmc_power_job_and_the_node_reboots(demo_cluster, run_shards, settings):
    settings.RACKPILOT_SIM_REBOOT_SECONDS = 0
    node = Node.objects.get(hostname="gpu001")
    with_bmc(node)
    policy(kind_pattern="ssh_unreachable", action=Action.POWER_CYCLE)
    before = simulator.run_command(node=node, argv=["cat", "/proc/sys/kernel/random/boot_id"]).stdout
    unreachable(node)

    (decision,) = services.evaluate(now=NOW, transport="sim")

    assert decision.outcome == Outcome.ACTED, decision.reason
    assert "power-cycle gpu001 through its BMC" in decision.reason
    job = Job.objects.get(public_id=decision.job_id)
    assert (job.kind, job.parameters["action"]) == ("bmc-power", "cycle")
    assert AuditEntry.objects.filter(object_repr="gpu001: power cycle through the BMC").exists()
    job = run_shards(job)
    assert job.status == JobStatus.SUCCEEDED, job.steps.get().summary
    after = simulator.run_command(node=node, argv=["cat", "/proc/sys/kernel/random/boot_id"]).stdout
    assert after != before


def test_a_node_without_a_bmc_login_fails_the_decision_naming_why(demo_cluster):
    node = Node.objects.get(hostname="gpu002")
    policy(kind_pattern="ssh_unreachable", action=Action.POWER_CYCLE)
    unreachable(node)

    (decision,) = services.evaluate(now=NOW, transport="sim")

    assert decision.outcome == Outcome.FAILED
    assert decision.reason.endswith("nothing changed: targets: No BMC login for gpu002.")  # words, not a repr
    assert not Job.objects.filter(kind="bmc-power").exists()


def test_a_gpu_reset_waits_for_the_drain_then_runs_nvidia_smi_r(demo_cluster, run_shards):
    node = Node.objects.get(hostname="gpu003")
    policy(kind_pattern="ecc_uncorrectable", action=Action.GPU_RESET)
    simulator.inject_fault(node=node, kind="ecc", target="4")
    assert simulator.node_state(node=node).gpu(4).remap_pending
    event = health.record_event(
        component=Gpu.objects.get(node=node, index=4), source=Source.TELEMETRY, kind="ecc_uncorrectable",
        severity=Severity.CRITICAL, summary="GPU 4: uncorrectable ECC", at=NOW,
    )  # fmt: skip

    (refused,) = services.evaluate(now=NOW, transport="sim")

    assert refused.outcome == Outcome.REFUSED and "gpu003 is not drained" in refused.reason
    refused.delete()
    drain_nodes(nodes=[node], reason="rackpilot ecc", since=NOW)

    (decision,) = services.evaluate(now=NOW, transport="sim")

    assert decision.outcome == Outcome.ACTED, decision.reason
    job = run_shards(Job.objects.get(public_id=decision.job_id))
    assert (job.kind, job.parameters["gpu_index"]) == ("gpu-reset", 4)
    assert job.status == JobStatus.SUCCEEDED
    reset = job.steps.get(step="reset")
    assert reset.status == StepStatus.SUCCEEDED and "was successfully reset" in reset.summary
    assert job.steps.get(step="check").status == StepStatus.SUCCEEDED
    assert simulator.node_state(node=node).gpu(4).remap_pending is False  # the reset applied the pending remap
    assert event.gpu.index == 4
