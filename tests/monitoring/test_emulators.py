"""The BMC clients against real emulators: ipmi_sim over lanplus, sushy-emulator over HTTPS, through the bmc-poll
job on the `local` transport (ipmitool and HTTP from this host, as a worker would)."""

import shutil

import pytest

from apps.inventory.models import NvlinkDomain, NvlinkSwitchTray
from apps.jobs.choices import StepStatus
from apps.jobs.services import TargetSpec, create_job
from apps.monitoring.bmc import logins
from apps.monitoring.choices import PollResult
from apps.monitoring.models import Bmc, BmcReading
from tests import factories
from tests.live_server import need

from .emulators import PASSWORD, USER

pytestmark = pytest.mark.django_db(transaction=True)


def _readings(node):
    return {reading.sensor: (reading.value, reading.unit) for reading in BmcReading.objects.latest_per_sensor(node)}


def test_ipmi_sim_sensors_over_lanplus_cipher_suite_3(ipmi_sim, emulated_node, poll):
    node = emulated_node("ipmi", ipmi_sim.port)

    job = poll(node, transport="local")

    assert _readings(node) == {
        "Inlet Temp": (24.0, "C"),
        "FAN1": (7200.0, "RPM"),
        "Total Power": (7000.0, "W"),
    }
    bmc = Bmc.objects.get(node=node)
    assert bmc.last_result == PollResult.OK
    assert "no DCMI power reading" in bmc.last_message  # ipmi_sim implements no DCMI
    assert job.steps.get().status == StepStatus.SUCCEEDED


def test_ipmi_sim_refuses_a_wrong_password(ipmi_sim, emulated_node, poll):
    node = emulated_node("ipmi", ipmi_sim.port, password="not-the-password")

    job = poll(node, transport="local")

    cell = job.steps.get()
    assert (cell.status, cell.summary) == (
        StepStatus.FAILED,
        f"BMC 127.0.0.1 ({node.hostname}) refused the credentials of user '{USER}'",
    )
    assert not BmcReading.objects.exists()
    assert Bmc.objects.get(node=node).last_result == PollResult.AUTH_FAILED


def test_a_bmc_that_never_answers_is_unreachable(emulated_node, poll, settings):
    from .emulators import free_port

    need(shutil.which("ipmitool"), "needs ipmitool (apt-get install ipmitool)")  # the poll runs it, unanswered
    settings.RACKPILOT_BMC_TIMEOUT_SECONDS = 3
    node = emulated_node("ipmi", free_port())

    job = poll(node, transport="local")

    assert Bmc.objects.get(node=node).last_result == PollResult.UNREACHABLE
    assert "did not answer" in job.steps.get().summary


def test_sushy_thermal_over_https_with_the_bmc_ca_trusted(sushy, emulated_node, poll, monkeypatch):
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(sushy.ca_file))  # verification on, against the BMC's own CA
    node = emulated_node("redfish", sushy.port)

    poll(node, transport="local")

    readings = _readings(node)
    assert readings["CPU Temp"] == (41.0, "C") and readings["Chassis Intake Temp"] == (25.0, "C")
    assert any(unit == "RPM" for _, unit in readings.values())
    bmc = Bmc.objects.get(node=node)
    assert bmc.last_result == PollResult.PARTIAL  # sushy serves no Power resource
    assert "no Power or EnvironmentMetrics" in bmc.last_message


def test_sushy_self_signed_certificate_is_refused_while_verification_is_on(sushy, emulated_node, poll):
    node = emulated_node("redfish", sushy.port)

    job = poll(node, transport="local")

    assert Bmc.objects.get(node=node).last_result == PollResult.ERROR
    assert "TLS certificate is not trusted" in job.steps.get().summary
    assert not BmcReading.objects.exists()


def test_sushy_read_with_verification_off_for_this_bmc(sushy, emulated_node, poll):
    node = emulated_node("redfish", sushy.port, verify_tls=False)

    poll(node, transport="local")

    assert "CPU Temp" in _readings(node)


def test_sushy_refuses_a_wrong_password(sushy, emulated_node, poll):
    node = emulated_node("redfish", sushy.port, password="not-the-password", verify_tls=False)

    job = poll(node, transport="local")

    assert job.steps.get().summary == f"BMC 127.0.0.1 ({node.hostname}) refused the credentials of user '{USER}'"
    assert not BmcReading.objects.exists()


def test_a_sites_poll_reads_its_switch_trays_bmcs_over_https_and_one_that_never_answers_is_unreachable(
    sushy, emulated_node, run_shards, settings
):
    from .emulators import free_port

    settings.RACKPILOT_BMC_TIMEOUT_SECONDS = 3
    node = emulated_node("redfish", sushy.port, verify_tls=False)
    rack = factories.make_rack(name="nvl09", site=node.rack.site)
    domain = NvlinkDomain.objects.create(name="nvl09", rack=rack, system="GB200 NVL72")
    answering, silent = (
        NvlinkSwitchTray.objects.create(name=f"nvl09-sw{slot}", domain=domain, slot=slot) for slot in (1, 2)
    )
    for tray, port in ((answering, sushy.port), (silent, free_port())):
        logins.save_bmc(
            switch_tray=tray, address="127.0.0.1", protocol="redfish", port=port, user=USER, verify_tls=False,
            password=PASSWORD,
        )  # fmt: skip
    job = create_job(
        kind="bmc-poll",
        targets=TargetSpec(nodes=(node.hostname,)),
        parameters={"site": node.rack.site.slug},
        transport="local",
    )

    job = run_shards(job)

    read = Bmc.objects.get(switch_tray=answering)
    assert read.last_result == PollResult.PARTIAL  # sushy serves no Power resource
    assert "CPU Temp" in {reading.sensor for reading in BmcReading.objects.latest_per_sensor(answering)}
    unreachable = Bmc.objects.get(switch_tray=silent)
    assert unreachable.last_result == PollResult.UNREACHABLE and unreachable.polls_failed == 1
    assert unreachable.last_message.startswith("BMC 127.0.0.1 (nvl09-sw2) did not answer")
    assert not BmcReading.objects.filter(switch_tray=silent).exists()
    assert job.events.filter(level="error", message__startswith="nvl09-sw2: BMC 127.0.0.1 (nvl09-sw2) did not").exists()
    assert job.steps.get().status == StepStatus.SUCCEEDED  # the node's own cell: a switch tray is no cell
