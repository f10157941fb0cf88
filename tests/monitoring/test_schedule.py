"""Beat's schedule of BMC reads per site, and pruning of old readings."""

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node
from apps.jobs.choices import JobStatus
from apps.jobs.models import Job
from apps.monitoring.bmc import polling, readings
from apps.monitoring.choices import BmcProtocol
from apps.monitoring.models import Bmc, BmcReading, BmcSchedule

pytestmark = pytest.mark.django_db


def test_a_site_with_bmcs_is_polled_once_per_interval(gpu_node, sim_bmc, settings):
    settings.RACKPILOT_BMC_POLL_SECONDS = 60
    sim_bmc()
    now = timezone.now()

    first = polling.schedule_polls(now=now)
    while_running = polling.schedule_polls(now=now + timedelta(seconds=120))
    Job.objects.update(status=JobStatus.SUCCEEDED, created=now)
    too_soon = polling.schedule_polls(now=now + timedelta(seconds=30))
    due = polling.schedule_polls(now=now + timedelta(seconds=61))

    assert [job.kind for job in first] == ["bmc-poll"]
    assert first[0].parameters == {"site": gpu_node.rack.site.slug}
    assert list(first[0].nodes.values_list("hostname", flat=True)) == ["gpu001"]  # only nodes with BMC settings
    assert (while_running, too_soon, len(due)) == ([], [], 1)


@pytest.mark.parametrize(
    ("install", "bmc_setting", "chosen"),
    [("sim", "", "sim"), ("ssh", "", "local"), ("local", "", "local"), ("sim", "local", "local")],
)
def test_the_polls_run_over_the_install_default_bmc_poll_offers_unless_told(
    gpu_node, sim_bmc, settings, install, bmc_setting, chosen
):
    settings.RACKPILOT_JOB_DEFAULT_TRANSPORT, settings.RACKPILOT_BMC_TRANSPORT = install, bmc_setting
    Node.objects.update(transport="")  # real nodes: the demo's are on the simulator (the test below)
    sim_bmc()

    assert [job.transport for job in polling.schedule_polls(now=timezone.now())] == [chosen]


def test_the_demos_bmcs_are_polled_on_the_simulator_in_the_services_wiring(gpu_node, sim_bmc, settings):
    settings.RACKPILOT_JOB_DEFAULT_TRANSPORT, settings.RACKPILOT_BMC_TRANSPORT = "ssh", ""
    sim_bmc()

    assert [job.transport for job in polling.schedule_polls(now=timezone.now())] == ["sim"]


def test_a_site_schedule_sets_its_own_interval_or_turns_reads_off(gpu_node, sim_bmc):
    sim_bmc()
    schedule = BmcSchedule.objects.create(site=gpu_node.rack.site, interval_seconds=600)
    now = timezone.now()
    polling.schedule_polls(now=now)
    Job.objects.update(status=JobStatus.SUCCEEDED, created=now)

    assert polling.schedule_polls(now=now + timedelta(seconds=300)) == []
    assert len(polling.schedule_polls(now=now + timedelta(seconds=601))) == 1
    Job.objects.update(status=JobStatus.SUCCEEDED, created=now)
    schedule.enabled = False
    schedule.save()
    assert polling.schedule_polls(now=now + timedelta(days=1)) == []


def test_no_bmcs_no_polls(demo_cluster):
    assert polling.schedule_polls() == []


def test_old_readings_are_pruned(gpu_node, settings):
    settings.RACKPILOT_BMC_RETENTION_DAYS = 7
    now = timezone.now()
    for age in (1, 8):
        BmcReading.objects.create(
            node=gpu_node, time=now - timedelta(days=age), kind="power", sensor="DCMI Power", unit="W", value=1.0
        )

    assert readings.prune_readings() == 1
    assert BmcReading.objects.get().time > now - timedelta(days=2)


def test_sim_bmcs_command_sets_up_the_demo_cluster(demo_cluster):
    call_command("sim_bmcs", stdout=io.StringIO())

    assert Bmc.objects.count() == Node.objects.exclude(bmc_address="").count() > 0
    assert all(bmc.has_password for bmc in Bmc.objects.all())


def test_sim_bmcs_reads_a_rack_scale_tray_over_redfish(db):
    load_cluster(ClusterShape(compute_nodes=8, rack_scale_racks=1))
    call_command("sim_bmcs", stdout=io.StringIO())

    assert Bmc.objects.get(node__hostname="nvl01-t01").protocol == BmcProtocol.REDFISH
    assert Bmc.objects.get(node__hostname="gpu001").protocol == BmcProtocol.IPMI
    # Its 9 NVLink switch trays' BMCs too (their leak detectors), over Redfish, at their own addresses.
    trays = Bmc.objects.filter(switch_tray__isnull=False).select_related("switch_tray")
    assert {(bmc.protocol, bmc.has_password) for bmc in trays} == {(BmcProtocol.REDFISH, True)}
    assert sorted(bmc.address for bmc in trays) == [f"10.24.0.{slot}" for slot in range(1, 10)]
