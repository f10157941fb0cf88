"""A GB200 NVL72 rack's page in a real browser after a leak in one of its NVLink switch trays, read by the switch
tray's own BMC: the leak is the first thing the page says, under its title, and the loop's readings count the
switch trays' leak sensors with the compute trays'."""

import pytest

from apps.accounts.choices import Role
from apps.inventory.models import NvlinkSwitchTray, Rack
from apps.jobs.services import TargetSpec, create_job
from apps.simulator import services as simulator
from tests import factories

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def leaking_rack(nvl72_trays, run_shards):
    """nvl01, its switch trays' BMCs set up and read once with a leak in switch tray 4 (before the browser starts:
    the poll runs its own event loop)."""
    for tray in NvlinkSwitchTray.objects.filter(domain__rack__name="nvl01"):
        factories.make_sim_bmc(tray)
    simulator.inject_fault(node=nvl72_trays[0], kind="leak", target="4")
    nodes = tuple(tray.hostname for tray in nvl72_trays)
    run_shards(create_job(kind="bmc-poll", targets=TargetSpec(nodes=nodes), transport="sim"))
    return Rack.objects.get(name="nvl01")


def test_a_switch_trays_leak_heads_the_rack_page(leaking_rack, live_server_url, page_as):
    page = page_as(Role.OPERATOR, "oncall")

    page.goto(f"{live_server_url}/racks/{leaking_rack.public_id}/")

    first = page.locator("main section").first
    assert first.get_attribute("id") == "rack-coolant"
    assert first.locator("h2").inner_text() == "Coolant leak in this rack"
    assert "switch tray nvl01-sw4's leak sensor nvl01-sw4-leak reads a leak" in first.inner_text()
    assert first.locator("button", has_text="Power the trays off").is_visible()
    assert "1 of 27 read a leak (nvl01-sw4)" in page.locator(".coolant-now").inner_text()
