"""The bmc-power kind: over the simulated BMCs (IPMI and Redfish; power off silences the node, on brings it back
freshly booted), against real ipmi_sim and sushy-emulator (skipped without them), and a BMC that never answers."""

import shutil
import zlib

import pytest
from rest_framework import serializers

from apps.core.models import AuditEntry
from apps.health.models import HealthEvent
from apps.jobs.choices import JobStatus, StepStatus
from apps.monitoring.bmc.power import start_bmc_power
from apps.simulator import services as simulator
from tests.live_server import need

from .emulators import USER, free_port

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def power(run_shards):
    """power(node, action, transport="sim") -> the finished bmc-power job."""

    def run(node, action, *, transport="sim", **kwargs):
        return run_shards(start_bmc_power(nodes=[node], action=action, transport=transport, **kwargs))

    return run


@pytest.fixture(autouse=True)
def quick_reboots(settings):
    settings.RACKPILOT_SIM_REBOOT_SECONDS = 0  # a simulated boot is immediate: the node answers at once after on


@pytest.mark.parametrize("protocol", ["ipmi", "redfish"])
def test_power_off_silences_the_node_and_on_brings_it_back(gpu_node, sim_bmc, power, protocol):
    sim_bmc(protocol=protocol)
    assert simulator.run_command(node=gpu_node, argv=["hostname"]).exit_code == 0

    job = power(gpu_node, "off")

    cell = job.steps.get()
    assert (job.status, cell.status) == (JobStatus.SUCCEEDED, StepStatus.SUCCEEDED), (
        cell.summary,
        list(job.events.values_list("message", flat=True)),
    )
    assert "power is off" in cell.summary
    silent = simulator.run_command(node=gpu_node, argv=["hostname"])
    assert silent.exit_code == 255 and "No route to host" in silent.stderr

    job = power(gpu_node, "on")

    assert job.steps.get().summary.startswith("on: power is on")
    assert simulator.run_command(node=gpu_node, argv=["hostname"]).exit_code == 0


def test_a_power_cycle_reboots_the_node_and_the_sel_records_it(gpu_node, sim_bmc, power):
    sim_bmc()
    before = simulator.run_command(node=gpu_node, argv=["cat", "/proc/sys/kernel/random/boot_id"]).stdout

    job = power(gpu_node, "cycle", reason="hung")

    assert job.steps.get().status == StepStatus.SUCCEEDED
    after = simulator.run_command(node=gpu_node, argv=["cat", "/proc/sys/kernel/random/boot_id"]).stdout
    assert after != before  # a new boot
    events = [(r.event, r.asserted) for r in simulator.sel_records(gpu_node)]
    assert events[-2:] == [("Power off/down", True), ("Power off/down", False)]
    stdout = zlib.decompress(job.steps.get().artifacts.get(stream="stdout").content).decode()
    assert "$ ipmitool ... chassis power cycle\nChassis Power Control: Cycle" in stdout


def test_status_changes_nothing_and_is_not_audited(gpu_node, sim_bmc, power):
    sim_bmc(protocol="redfish")

    job = power(gpu_node, "status")

    assert job.steps.get().summary.startswith("power is on")
    assert not AuditEntry.objects.filter(object_repr__contains="through the BMC").exists()
    assert simulator.power_is_on(gpu_node)


def test_destructive_actions_are_audited_with_who_asked(gpu_node, sim_bmc, power, operator):
    sim_bmc()

    power(gpu_node, "reset", requested_by=operator, reason="kernel hang")

    entry = AuditEntry.objects.get(object_repr=f"{gpu_node.hostname}: power reset through the BMC")
    assert entry.actor == operator and entry.changes["reason"] == "kernel hang"


def test_a_node_without_bmc_settings_is_refused_naming_the_field(gpu_node):
    with pytest.raises(serializers.ValidationError) as caught:
        start_bmc_power(nodes=[gpu_node], action="cycle")
    assert "nodes" in caught.value.detail and gpu_node.hostname in str(caught.value.detail["nodes"])

    with pytest.raises(serializers.ValidationError) as caught:
        start_bmc_power(nodes=[gpu_node], action="explode")
    assert "action" in caught.value.detail


def test_the_password_never_reaches_the_transcript(gpu_node, sim_bmc, power, settings):
    sim_bmc(protocol="redfish")

    job = power(gpu_node, "cycle")

    stdout = zlib.decompress(job.steps.get().artifacts.get(stream="stdout").content).decode()
    assert '"ResetType": "PowerCycle"' in stdout and "PowerState" in stdout
    assert settings.RACKPILOT_SIM_BMC_PASSWORD not in stdout
    assert settings.RACKPILOT_SIM_BMC_PASSWORD not in str(list(job.events.values_list("message", "data")))


def test_a_bmc_that_never_answers_fails_the_step_and_records_bmc_unreachable(gpu_node, power, settings):
    from apps.monitoring.bmc import logins

    need(shutil.which("ipmitool"), "needs ipmitool (apt-get install ipmitool)")
    settings.RACKPILOT_BMC_TIMEOUT_SECONDS = 3
    logins.save_bmc(
        node=gpu_node, address="127.0.0.1", protocol="ipmi", port=free_port(), user=USER, verify_tls=True,
        password="x",
    )  # fmt: skip

    job = power(gpu_node, "cycle", transport="local")

    cell = job.steps.get()
    assert cell.status == StepStatus.FAILED and f"BMC 127.0.0.1 ({gpu_node.hostname}) did not answer" in cell.summary
    event = HealthEvent.objects.get(kind="bmc_unreachable")
    assert (event.component_type, event.severity, event.node) == ("bmc", "major", gpu_node)


# --- real emulators -------------------------------------------------------------------------------------------------


def test_ipmi_sim_power_status_over_lanplus(ipmi_sim, emulated_node, power):
    node = emulated_node("ipmi", ipmi_sim.port)

    job = power(node, "status", transport="local")

    cell = job.steps.get()
    assert cell.status == StepStatus.SUCCEEDED, cell.summary
    assert cell.summary.startswith("power is ")


def test_sushy_power_off_then_on_is_read_back(sushy, emulated_node, power):
    node = emulated_node("redfish", sushy.port, verify_tls=False)

    off = power(node, "off", transport="local")
    on = power(node, "on", transport="local")

    assert off.steps.get().status == StepStatus.SUCCEEDED, off.steps.get().summary
    assert "power is off" in off.steps.get().summary
    assert on.steps.get().status == StepStatus.SUCCEEDED, on.steps.get().summary
