"""The top bar in a real browser: one row at 1440 and 1920 px (it wrapped to two with 18 links), and a group's menu
opens on a click and leads to its pages."""

import pytest

from apps.accounts.choices import Role

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_the_bar_is_one_row_and_its_menus_open(live_server_url, page_as):
    page = page_as(Role.VIEWER)
    for width in (1440, 1920):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server_url}/jobs/")
        tops = page.eval_on_selector_all(
            ".topbar nav > a, .topbar nav > details > summary",
            "entries => entries.map(entry => Math.round(entry.getBoundingClientRect().top))",
        )
        assert len(tops) >= 8 and len(set(tops)) == 1, f"the bar wraps at {width} px: {tops}"
    page.click(".topbar details.menu >> text=Inventory")
    page.click(".topbar .menu-items >> text=Racks")
    page.wait_for_url("**/racks/")
    assert page.locator(".topbar nav a.active").text_content() == "Racks"  # in its closed menu
    assert page.locator(".topbar details.menu.active > summary").inner_text().startswith("Inventory")
