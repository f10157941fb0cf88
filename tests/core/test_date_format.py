"""One date and time format on every page (issue 27, walk 11): a datetime a template prints bare reads as the tables'
2026-12-05 11:50, not Django's English default ("Dec. 5, 2026, 11:50 a.m.") beside them."""

import datetime as dt

import pytest
from django.template import Context, Template

from apps.inventory.models import Node

WHEN = dt.datetime(2026, 12, 5, 11, 50, 7, tzinfo=dt.UTC)


def test_bare_dates_and_times_print_as_the_tables_do(settings):
    settings.TIME_ZONE = "UTC"
    text = Template('{{ when }} | {{ when|date }} | {{ when|time }} | {{ when|date:"Y-m-d H:i" }}')
    assert text.render(Context({"when": WHEN})) == "2026-12-05 11:50 | 2026-12-05 | 11:50 | 2026-12-05 11:50"


@pytest.mark.django_db
def test_the_node_page_says_when_a_node_was_drained_in_that_format(browser_as, viewer, demo_cluster, settings):
    settings.TIME_ZONE = "UTC"
    node = Node.objects.get(hostname="gpu004")
    Node.objects.filter(pk=node.pk).update(drained_at=WHEN, drain_reason="fan")
    page = browser_as(viewer).get(f"/nodes/{node.public_id}/").content.decode()
    assert "Drained since 2026-12-05 11:50" in page and "a.m." not in page
