"""The bmc-poll kind over the simulated BMCs: readings stored as series, results counted, refusals named."""

import pytest

from apps.inventory.models import Node
from apps.jobs.choices import JobStatus, StepStatus
from apps.monitoring.choices import PollResult, SensorKind
from apps.monitoring.models import Bmc, BmcReading
from apps.simulator import services as simulator

pytestmark = pytest.mark.django_db(transaction=True)


def _latest(node):
    return {reading.sensor: reading for reading in BmcReading.objects.latest_per_sensor(node)}


def test_ipmi_poll_stores_temperatures_fans_and_power(gpu_node, sim_bmc, poll):
    sim_bmc()

    job = poll(gpu_node)

    assert job.status == JobStatus.SUCCEEDED
    readings = _latest(gpu_node)
    assert readings["Inlet Temp"].kind == SensorKind.TEMPERATURE and 18 <= readings["Inlet Temp"].value <= 26
    assert readings["FAN1"].unit == "RPM" and readings["FAN1"].value > 1000
    assert readings["DCMI Power"].kind == SensorKind.POWER
    # idle: eight GPUs near 80 W, two CPUs, the board: a couple of kW, and DCMI agrees with the SDR's total
    assert 1000 < readings["DCMI Power"].value < 3000
    assert readings["Total Power"].value == readings["DCMI Power"].value
    bmc = Bmc.objects.get(node=gpu_node)
    assert (bmc.last_result, bmc.polls_ok, bmc.polls_failed) == (PollResult.OK, 1, 0)
    cell = job.steps.get()
    assert cell.status == StepStatus.SUCCEEDED and "W" in cell.summary


def test_redfish_poll_reads_thermal_power_and_environment_metrics(gpu_node, sim_bmc, poll):
    sim_bmc(protocol="redfish")

    poll(gpu_node)

    readings = _latest(gpu_node)
    assert {"Inlet Temp", "Exhaust Temp", "GPU1 Temp", "FAN1", "Power Consumed", "PSU1"} <= set(readings)
    assert readings["Exhaust Temp"].value > readings["Inlet Temp"].value
    assert Bmc.objects.get(node=gpu_node).last_result == PollResult.OK


def test_power_follows_load_and_fans_follow_a_hot_gpu(gpu_node, sim_bmc, poll):
    from apps.simulator.backend import SimulatorBackend, register

    sim_bmc()
    poll(gpu_node)
    idle = _latest(gpu_node)
    register(SimulatorBackend(load=1.0))
    try:
        BmcReading.objects.all().delete()
        poll(gpu_node)
        busy = _latest(gpu_node)
        simulator.inject_fault(node=gpu_node, kind="thermal", target="3", parameters={"temperature": 95})
        BmcReading.objects.all().delete()
        poll(gpu_node)
        hot = _latest(gpu_node)
    finally:
        register()

    assert busy["DCMI Power"].value > idle["DCMI Power"].value + 4000  # eight GPUs at their 700 W cap
    assert busy["Exhaust Temp"].value > idle["Exhaust Temp"].value
    assert abs(hot["GPU4 Temp"].value - 95) <= 1  # held at the slowdown temperature
    assert hot["FAN1"].value > busy["FAN1"].value


def test_a_gpu_fallen_off_the_bus_has_no_reading(gpu_node, sim_bmc, poll):
    sim_bmc()
    simulator.inject_fault(node=gpu_node, kind="xid79", target="2")

    poll(gpu_node)

    readings = _latest(gpu_node)
    assert "GPU3 Temp" not in readings and "GPU2 Temp" in readings


def test_refused_credentials_name_the_bmc_and_change_nothing_else(gpu_node, sim_bmc, poll):
    sim_bmc()
    poll(gpu_node)
    before = BmcReading.objects.count()
    bmc = sim_bmc(password="wrong-password")
    stored_password = bmc.password_encrypted

    job = poll(gpu_node)

    assert job.status == JobStatus.FAILED
    cell = job.steps.get()
    assert cell.status == StepStatus.FAILED
    assert cell.summary == f"BMC {gpu_node.bmc_address} (gpu001) refused the credentials of user 'admin'"
    assert job.events.filter(level="error", message=cell.summary).exists()
    assert BmcReading.objects.count() == before
    bmc.refresh_from_db()
    assert (bmc.last_result, bmc.polls_ok, bmc.polls_failed) == (PollResult.AUTH_FAILED, 1, 1)
    assert bmc.password_encrypted == stored_password
    assert "wrong-password" not in "".join(job.events.values_list("message", flat=True))


def test_a_node_without_bmc_settings_is_an_error_cell(demo_cluster, poll):
    node = Node.objects.get(hostname="gpu002")

    job = poll(node)

    assert job.steps.get().summary == "gpu002 has no BMC settings"
