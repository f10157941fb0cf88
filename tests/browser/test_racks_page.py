"""The racks list in a real browser: the table comes first, and its page's front and rear elevations are drawn when
the operator scrolls to them (htmx asks /racks/elevations/ for the drawings of the same racks), without a reload."""

import pytest

from apps.accounts.choices import Role
from apps.inventory.models import Rack
from tests import factories
from tests.browser.session import log_in

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_the_elevations_are_drawn_when_scrolled_to(demo_cluster, live_server_url, browser_page):
    factories.make_user(role=Role.VIEWER, username="viewer", password="correct-horse-battery")
    page = browser_page
    log_in(page, live_server_url, "viewer")
    page.set_viewport_size({"width": 1440, "height": 400})  # the elevations start below the first screen
    page.goto(f"{live_server_url}/racks/?sort=-name")
    page.evaluate("window.notReloaded = true")
    assert page.locator("#rack-elevations").count() == 0

    page.locator("#elevations").scroll_into_view_if_needed()
    page.wait_for_selector("#rack-elevations .rack")
    names = page.locator("#rack-elevations .rack h3 a").all_inner_texts()
    assert names == sorted(Rack.objects.values_list("name", flat=True), reverse=True)  # the list's order
    assert page.locator("#rack-elevations a.dev.node", has_text="gpu001").count() == 2  # front and rear
    assert page.evaluate("window.notReloaded") is True


def test_a_1u_switchs_labels_fit_its_slot_on_one_line(demo_cluster, live_server_url, browser_page):
    """mgmt-sw01 (1U, at the rear of net01): its name and "Management management" wrapped onto a second line that
    the 14px slot cut off; now each label stays on one line (the second gives way with an ellipsis) and the link's
    title carries the whole text."""
    factories.make_user(role=Role.VIEWER, username="viewer", password="correct-horse-battery")
    page = browser_page
    log_in(page, live_server_url, "viewer")
    rack = Rack.objects.get(name="net01")
    page.goto(f"{live_server_url}/racks/{rack.public_id}/")

    switch = page.locator("a.dev.switch", has_text="mgmt-sw01")
    assert "mgmt-sw01" in switch.get_attribute("title")
    heights = switch.evaluate(
        "dev => [dev.getBoundingClientRect().height, ...[...dev.children].map(s => s.getBoundingClientRect().height)]"
    )
    slot, *labels = heights
    assert labels and all(label <= slot for label in labels), heights
