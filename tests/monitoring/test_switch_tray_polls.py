"""A rack-scale system's NVLink switch trays in the BMC poll and in the rack's draw, on the demo's GB200 NVL72 rack
nvl01: a site whose only BMC settings are its switch trays' is polled all the same, on schedule and by hand, each
switch tray a row of the job's matrix; what they read counts in the rack's measured draw (the figure, the text that
says what it includes, the racks list's sort)."""

import io

import pytest
from django.core.management import call_command
from django.urls import reverse

from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node, NvlinkSwitchTray, Rack
from apps.jobs.choices import JobStatus, StepStatus
from apps.jobs.models import Job
from apps.monitoring.bmc.polling import schedule_polls
from apps.monitoring.choices import PollResult
from apps.monitoring.models import Bmc, BmcReading
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)

TRAYS = [f"nvl01-sw{slot}" for slot in range(1, 10)]


@pytest.fixture
def switch_trays(db):
    """An H200 rack (r01) and the NVL72 rack nvl01 in one site, whose only BMC settings are nvl01's 9 switch trays'
    (for the simulated BMCs, Redfish)."""
    load_cluster(ClusterShape(compute_nodes=8, rack_scale_racks=1))
    trays = list(NvlinkSwitchTray.objects.order_by("slot"))
    for tray in trays:
        factories.make_sim_bmc(tray)
    return trays


def test_a_site_whose_only_bmcs_are_its_switch_trays_is_polled_one_row_per_switch_tray(switch_trays, run_shards):
    [job] = schedule_polls()

    assert (job.parameters, job.transport, job.node_count) == ({"site": "demo-dc"}, "sim", 0)
    job = run_shards(job)
    assert job.status == JobStatus.SUCCEEDED
    cells = list(job.steps.order_by("hostname"))
    assert [cell.hostname for cell in cells] == TRAYS
    assert {(cell.node_id, cell.status) for cell in cells} == {(None, StepStatus.SUCCEEDED)}
    assert all(" W" in cell.summary and cell.artifacts.filter(stream="stdout").exists() for cell in cells)
    assert set(Bmc.objects.values_list("last_result", flat=True)) == {PollResult.OK}
    assert BmcReading.objects.filter(switch_tray__isnull=False, sensor="Power Consumed").count() == 9
    messages = list(job.events.values_list("message", flat=True))
    assert messages[0].startswith("bmc-poll on 9 switch trays over sim")
    assert any(message.endswith(" BMC readings stored from 9 switch trays") for message in messages)
    assert not schedule_polls()  # one poll at a time, as a site with nodes' BMCs


def test_the_job_page_and_api_say_it_read_switch_trays(switch_trays, run_shards, browser_as, api_as, viewer):
    job = run_shards(schedule_polls()[0])
    page = browser_as(viewer)

    html = page.get(reverse("job-page", args=[job.public_id])).content.decode()
    assert "<dt>Targets</dt><dd>9 switch trays</dd>" in html and "<dt>Nodes</dt>" not in html
    assert all(f'<tr><th class="mono">{name}</th>' in html for name in TRAYS)
    # The matrix counts its rows as what they are.
    assert "<h2>Switch tray × step</h2>" in html and "<thead><tr><th>Switch tray</th>" in html
    assert "Switch trays 1–9 of 9" in html and "0 switch trays with a failure" in html and "Nodes 1" not in html
    assert "9 switch trays" in page.get(reverse("jobs-page")).content.decode()
    body = api_as(viewer).get(f"/api/jobs/{job.public_id}/").json()
    assert (body["status"], body["node_count"], body["target_spec"]) == ("succeeded", 0, {"devices": TRAYS})


def test_a_poll_asked_for_by_hand_reads_the_switch_trays_as_rows_when_no_node_has_bmc_settings(
    switch_trays, run_shards, api_as, operator
):
    created = api_as(operator).post("/api/jobs/", {"kind": "bmc-poll", "targets": {"racks": ["nvl01"]}}, format="json")

    assert created.status_code == 201, created.content
    job = run_shards(Job.objects.get(public_id=created.json()["id"]))
    status = dict(job.steps.values_list("hostname", "status"))
    assert {status[name] for name in TRAYS} == {StepStatus.SUCCEEDED}
    # The compute trays named have no BMC settings: error cells, as any node's.
    assert {status[tray.hostname] for tray in Node.objects.filter(rack__name="nvl01")} == {StepStatus.ERROR}
    assert set(Bmc.objects.values_list("last_result", flat=True)) == {PollResult.OK}


def test_the_switch_trays_draw_is_the_racks_measured_draw_its_text_and_its_sort(
    switch_trays, run_shards, browser_as, viewer
):
    run_shards(schedule_polls()[0])
    nvl01 = Rack.objects.get(name="nvl01")
    read = sum(BmcReading.objects.filter(switch_tray__isnull=False, kind="power").values_list("value", flat=True))
    node = Node.objects.get(hostname="gpu001")  # r01: one node read, drawing less than the switch trays
    BmcReading.objects.create(node=node, time=BmcReading.objects.first().time, kind="power", sensor="DCMI Power",
                              unit="W", value=read - 500)  # fmt: skip
    page = browser_as(viewer)

    detail = page.get(reverse("rack-detail", args=[nvl01.public_id])).content.decode()
    assert f"{round(read / 1000, 2)} kW" in detail
    assert "from 0 of the 18 trays on and 9 switch trays, read by their BMC" in detail
    listed = page.get(reverse("rack-list"), {"sort": "-measured_kw"})
    assert [rack.name for rack in listed.context["object_list"]][:2] == ["nvl01", "r01"]
    assert "(9 switch trays)" in listed.content.decode()


def test_the_demos_nvl72_rack_counts_its_compute_and_switch_trays_once_every_bmc_is_read(
    db, run_shards, browser_as, viewer
):
    load_cluster(ClusterShape(compute_nodes=8, rack_scale_racks=1))
    call_command("sim_bmcs", stdout=io.StringIO())  # as `make run` sets the demo up: every node's and switch tray's

    job = run_shards(schedule_polls()[0])

    assert job.status == JobStatus.SUCCEEDED and "devices" not in job.target_spec  # read beside a node, as before
    nvl01 = Rack.objects.get(name="nvl01")
    power = BmcReading.objects.filter(kind="power", sensor="Power Consumed")  # each chassis' whole draw
    trays = sum(power.filter(switch_tray__domain__rack=nvl01).values_list("value", flat=True))
    nodes = sum(power.filter(node__rack=nvl01).values_list("value", flat=True))
    detail = browser_as(viewer).get(reverse("rack-detail", args=[nvl01.public_id])).content.decode()
    assert f"{round((nodes + trays) / 1000, 2)} kW" in detail
    assert "from 18 of the 18 trays on and 9 switch trays, read by their BMC in the last 10 minutes" in detail
