"""The dashboard's panels from the apps above the inventory come through its panel registry."""

import pytest
from django.utils.html import escape

from apps.inventory import dashboard
from apps.topology.services import rule_summary

pytestmark = pytest.mark.django_db


def test_topology_and_monitoring_fill_their_panels_from_their_app_configs():
    assert [panel.name for panel in dashboard.panels()] == [
        "topology-rules",
        "what-is-wrong-now",
        "telemetry-health",
        "fleet-health",
        "gpu-hours",
    ]


def test_the_dashboard_shows_each_registered_panel(browser_as, viewer, demo_cluster):
    page = browser_as(viewer).get("/")
    assert page.status_code == 200
    assert b'id="rule-summary"' in page.content and b"Topology rules" in page.content
    titles = [rule.title for rule in rule_summary().rules]
    assert titles and all(escape(title) in page.content.decode() for title in titles)


def test_a_panel_registered_twice_under_one_name_is_refused():
    with pytest.raises(ValueError, match="topology-rules"):
        dashboard.register_panel(name="topology-rules", template="x.html", context=dict)
