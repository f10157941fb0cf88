"""The top bar (issue 27, walk 11): its 20 pages in seven groups, so it stays one row; the page's item and its group
are highlighted, and no other."""

import re

import pytest

from apps.core.navigation import GROUPS, ITEMS

pytestmark = pytest.mark.django_db


def _nav(html: str) -> str:
    return html[html.index("<nav>") : html.index("</nav>")]


def test_every_page_is_in_the_bar_once_under_few_top_level_entries(browser_as, viewer):
    nav = _nav(browser_as(viewer).get("/jobs/").content.decode())
    hrefs = re.findall(r'<a href="([^"]*)"', nav)
    assert len(ITEMS) == 20 and len(hrefs) == len(set(hrefs)) == len(ITEMS) + 1  # and the API's docs
    menus = re.findall(r'<details class="menu[^"]*"><summary>([^<]*)</summary>', nav)
    plain = [label for label, items in GROUPS if len(items) == 1]
    assert menus == [label for label, items in GROUPS if len(items) > 1]
    assert len(menus) + len(plain) + 1 <= 9  # top-level entries, API included


def test_the_pages_item_and_its_group_are_highlighted(browser_as, viewer):
    nav = _nav(browser_as(viewer).get("/remediation/").content.decode())
    assert re.findall(r'<a href="[^"]*" class="active"[^>]*>([^<]*)</a>', nav) == ["Remediation"]
    assert re.findall(r'<details class="menu active"><summary>([^<]*)</summary>', nav) == ["Health"]
    # Two items under /remediation/: the page's is the longer address it is under.
    for path, item in (("/remediation/windows/", "Maintenance windows"), ("/remediation/repairs/", "Remediation")):
        nav = _nav(browser_as(viewer).get(path).content.decode())
        assert re.findall(r'<a href="[^"]*" class="active"[^>]*>([^<]*)</a>', nav) == [item]
    dashboard = _nav(browser_as(viewer).get("/").content.decode())
    assert re.findall(r'class="active"[^>]*>([^<]*)</a>', dashboard) == ["Dashboard"]
    assert "menu active" not in dashboard
