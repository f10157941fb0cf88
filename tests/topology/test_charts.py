"""The topology map: tiers, planes, hover labels with ports, rule violations in red, racks grouped at scale. The
figure is a plain dict: the helpers read it through plotly.graph_objects, which refuses a property Plotly does not
know."""

import json

import plotly.graph_objects as go
import pytest

from apps.core.charts import figure_json
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Cable
from apps.topology.charts import PLANE_COLOURS, VIOLATION, topology_figure
from apps.topology.graph import build_cluster_graph
from apps.topology.services import evaluate_topology, run_rules
from tests.topology.helpers import delete_leaf_uplinks, nic

pytestmark = pytest.mark.django_db


def traces(figure: dict) -> dict:
    """Traces by name, as Plotly validates them; the hover-only companions of link traces come after the drawn ones
    and are kept apart."""
    named = {}
    for trace in go.Figure(figure).data:
        if trace.mode == "markers" and trace.showlegend is False:
            named.setdefault(f"{trace.name} (hover)", []).append(trace)
        else:
            named.setdefault(trace.name, []).append(trace)
    return named


def points(trace_list) -> dict[str, tuple[float, float]]:
    """Marker positions by the element's name (first line of the hover text)."""
    found = {}
    for trace in trace_list:
        for x, y, text in zip(trace.x, trace.y, trace.hovertext, strict=True):
            found[text.split("<br>")[0].removeprefix("<b>").removesuffix("</b>")] = (x, y)
    return found


def test_demo_map_has_three_tiers_and_two_planes(demo_cluster):
    report = evaluate_topology()
    figure = topology_figure(report.cluster, report.rules)
    by_name = traces(figure)
    compute = points(by_name["Compute nodes"])
    switches = points(by_name["Switches"])
    management = points(by_name["Management nodes"])
    assert len(compute) == 32 and len(switches) == 13 and len(management) == 3
    assert {y for _, y in compute.values()} == {0.0}
    assert switches["leaf-r01-a"][1] == switches["leaf-r01-b"][1] == 1.0
    assert switches["spine-a1"][1] == 2.0
    assert {y for _, y in management.values()} == {3.0}
    # Plane A on the left, plane B on the right, each leaf above its rack.
    assert switches["spine-a2"][0] < 0.5 < switches["spine-b1"][0]
    assert switches["leaf-r01-a"][0] < switches["leaf-r01-b"][0] < switches["leaf-r02-a"][0]
    assert "Named by rules" not in by_name and "Links named by rules" not in by_name
    assert {trace.line.color for trace in by_name["Plane A links"]} == {PLANE_COLOURS["A"]}
    assert {trace.line.color for trace in by_name["Plane B links"]} == {PLANE_COLOURS["B"]}
    assert all(trace.visible == "legendonly" for trace in by_name["Management links"])


def test_link_hover_shows_ends_ports_and_speed(demo_cluster):
    figure = topology_figure(build_cluster_graph())
    hovers = [text for trace in traces(figure)["Plane A links (hover)"] for text in trace.hovertext]
    access = next(text for text in hovers if text.startswith("<b>gpu001 ↔ leaf-r01-a</b>"))
    assert "plane A · 4 cables · 1.6 Tb/s up of 1.6 Tb/s" in access
    assert "gpu001:ens1np0 → leaf-r01-a:swp1 · 400 Gb/s aoc" in access
    uplink = next(text for text in hovers if text.startswith("<b>leaf-r01-a ↔ spine-a1</b>"))
    assert "16 cables · 6.4 Tb/s" in uplink and "… 8 more" in uplink


def test_wider_lines_for_more_capacity(demo_cluster):
    widths = {trace.line.width for trace in traces(topology_figure(build_cluster_graph()))["Plane A links"]}
    assert len(widths) >= 2  # node links (1.6 Tb/s) thinner than leaf-spine bundles (6.4 Tb/s)


def test_violations_are_red(demo_cluster):
    port = nic("gpu007", "ens3np0")
    port.mtu = 1500
    port.save()
    delete_leaf_uplinks("leaf-r02-b")
    report = evaluate_topology()
    by_name = traces(topology_figure(report.cluster, report.rules))
    flagged = points(by_name["Named by rules"])
    assert set(flagged) == {"gpu007", "leaf-r02-b", *[f"gpu{n:03d}" for n in range(9, 17)]}
    assert all(trace.marker.color == VIOLATION for trace in by_name["Named by rules"])
    gpu007 = next(text for text in by_name["Named by rules"][0].hovertext if text.startswith("<b>gpu007</b>"))
    assert "✗ Data NIC MTU is 9000 and consistent per plane" in gpu007
    red_links = [text for trace in by_name["Links named by rules (hover)"] for text in trace.hovertext]
    assert any(text.startswith("<b>gpu007 ↔ leaf-r01-a</b>") for text in red_links)
    assert {trace.line.color for trace in by_name["Links named by rules"]} == {VIOLATION}


def test_many_nodes_are_drawn_one_marker_per_rack(demo_cluster):
    delete_leaf_uplinks("leaf-r01-a")
    cluster = build_cluster_graph()
    by_name = traces(topology_figure(cluster, run_rules(cluster), group_above=16))
    assert "Compute nodes" not in by_name
    racks = points(by_name["Racks of compute nodes"])
    assert list(racks) == ["Rack r01", "Rack r02", "Rack r03", "Rack r04"]
    assert set(points(by_name["Named by rules"])) >= {"Rack r01", "leaf-r01-a"}
    hovers = [text for trace in by_name["Plane B links (hover)"] for text in trace.hovertext]
    rack_link = next(text for text in hovers if text.startswith("<b>r01 (8) ↔ leaf-r01-b</b>"))
    assert "32 cables · 12.8 Tb/s" in rack_link and "8 nodes" in rack_link


def test_figure_json_is_plain_data(demo_cluster):
    data = figure_json(topology_figure(build_cluster_graph()))
    assert set(data) >= {"data", "layout"}
    assert json.loads(json.dumps(data)) == data


@pytest.mark.parametrize("group_above", [64, 16])
def test_plotly_accepts_the_map_and_builds_the_same_one(demo_cluster, group_above):
    delete_leaf_uplinks("leaf-r02-b")  # red elements and links, and a leaf without uplinks, in the figure too
    report = evaluate_topology()
    figure = topology_figure(report.cluster, report.rules, group_above=group_above)

    validated = json.loads(go.Figure(figure).to_json())  # raises on a property Plotly does not know

    assert figure_json(figure) == validated


def test_the_map_of_512_nodes_groups_them_by_rack(db, django_assert_num_queries):
    shape = ClusterShape(compute_nodes=512)
    load_cluster(shape)
    with django_assert_num_queries(8):  # the same eight as for the demo: see test_graph.py
        cluster = build_cluster_graph()
    results = run_rules(cluster)
    assert all(result.passed for result in results)
    figure = topology_figure(cluster, results)
    by_name = traces(figure)
    assert len(points(by_name["Racks of compute nodes"])) == 64
    # Two leaves a rack; 64 racks × 32 uplinks over 128-port spines: 32 spines a plane; one management switch.
    assert shape.spines == 32
    assert len(points(by_name["Switches"])) == 64 * 2 + 2 * 32 + 1
    # Labels thinned out so they do not overlap: at most 16 racks named on the axis.
    labelled = [text for text in by_name["Racks of compute nodes"][0].text if text]
    assert 0 < len(labelled) <= 16
    # A leaf's 32 healthy uplinks share one hover target: 128 of them instead of 4,096 (the map was ~950 KB).
    hovers = [text for trace in by_name["Plane A links (hover)"] for text in trace.hovertext]
    summaries = [text for text in hovers if "uplinks</b>" in text]
    assert len(summaries) == 64 and "32 links · 32 cables" in summaries[0]
    assert len(json.dumps(figure_json(figure))) < 400_000


def test_a_grouped_map_sums_up_each_leafs_healthy_uplinks_and_keeps_failing_ones_apart(demo_cluster):
    # One uplink cable fewer: leaf-r01-a is oversubscribed (12.8 Tb/s down, 12.4 up) and its links are named.
    Cable.objects.filter(a_switch__name="leaf-r01-a", b_switch__name="spine-a1").first().delete()
    cluster = build_cluster_graph()
    by_name = traces(topology_figure(cluster, run_rules(cluster), group_above=16))
    hovers = [text for trace in by_name["Plane A links (hover)"] for text in trace.hovertext]
    assert not any(text.startswith("<b>leaf-r02-a ↔ spine-a1</b>") for text in hovers)  # healthy: summed up
    r02 = next(text for text in hovers if text.startswith("<b>leaf-r02-a uplinks</b>"))
    assert "plane A · 2 links · 32 cables · 12.8 Tb/s, all up" in r02 and "to spine-a1, spine-a2" in r02
    assert {text.split("</b>")[0] for text in hovers if "uplinks</b>" in text} == {
        f"<b>leaf-r0{rack}-a uplinks" for rack in (2, 3, 4)
    }
    named = [text for trace in by_name["Links named by rules (hover)"] for text in trace.hovertext]
    failing = next(text for text in named if text.startswith("<b>leaf-r01-a ↔ spine-a1</b>"))
    assert "15 cables · 6 Tb/s" in failing
    # Not grouped (a few dozen nodes), every link keeps its own hover.
    single = [text for trace in traces(topology_figure(cluster))["Plane A links (hover)"] for text in trace.hovertext]
    assert any(text.startswith("<b>leaf-r02-a ↔ spine-a1</b>") for text in single)
    assert not any("uplinks</b>" in text for text in single)
