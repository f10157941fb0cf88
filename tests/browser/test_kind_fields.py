"""Forms whose fields follow a choice, in a real browser (static/js/kind_fields.js): the simulator's inject form
shows the chosen fault's parameters only, the benchmark form the chosen suite's fields only (issue 27, walk 11) and the
chosen scope's input only (a rack, a tag or names; so does the discovery form)."""

import pytest

from apps.accounts.choices import Role
from apps.inventory.demo import DEMO, load_cluster
from tests import factories
from tests.browser.session import log_in

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_the_fields_follow_the_fault_and_the_suite(live_server_url, browser_page):
    load_cluster(DEMO)
    factories.make_user(role=Role.OPERATOR, username="op", password="correct-horse-battery")
    page = browser_page
    page.set_default_timeout(30000)
    log_in(page, live_server_url, "op")

    page.goto(f"{live_server_url}/simulator/")
    page.select_option("#inject-form select[name=kind]", "mtu")
    assert page.is_visible("#inject-form input[name=parameter_mtu]")
    assert not page.is_visible("#inject-form input[name=parameter_crc_per_million]")
    page.select_option("#inject-form select[name=kind]", "degraded_cable")
    assert page.is_visible("#inject-form input[name=parameter_crc_per_million]")
    assert page.is_visible("#inject-form input[name=parameter_rate_gbps]")
    assert not page.is_visible("#inject-form input[name=parameter_mtu]")

    page.goto(f"{live_server_url}/benchmarks/")
    page.select_option("#benchmark-form select[name=suite]", "burn-in")
    assert page.is_visible("#benchmark-form input[name=duration_seconds]")
    assert not page.is_visible("#benchmark-form input[name=min_bytes]")
    page.select_option("#benchmark-form select[name=suite]", "nccl")
    assert page.is_visible("#benchmark-form input[name=min_bytes]")
    assert not page.is_visible("#benchmark-form input[name=duration_seconds]")

    page.select_option("#benchmark-form select[name=scope]", "tag")  # which nodes: its own input only
    assert page.is_visible("#benchmark-form select[name=tag]")
    assert not page.is_visible("#benchmark-form select[name=rack]")
    assert not page.is_visible("#benchmark-form input[name=nodes]")
    assert page.is_visible("#benchmark-form input[name=min_bytes]")  # the suite's fields still follow the suite
    page.select_option("#benchmark-form select[name=scope]", "nodes")
    assert page.is_visible("#benchmark-form input[name=nodes]")
    assert not page.is_visible("#benchmark-form select[name=tag]")

    page.goto(f"{live_server_url}/discovery/")
    assert not page.is_visible("#discover-form select[name=rack]")  # "All nodes" takes no input
    page.select_option("#discover-form select[name=scope]", "rack")
    assert page.is_visible("#discover-form select[name=rack]")
    assert not page.is_visible("#discover-form input[name=nodes]")
