"""The topology map: a Plotly figure built here, embedded by the template with json_script, drawn by charts.js.

Three tiers, bottom to top: compute nodes, the switch layer (leaves, then spines, then the core of a fabric of pods;
plane A on the left, plane B on the right, the management switch between them), management nodes. Links are coloured
by plane and drawn wider the more capacity they carry; hovering a link's midpoint shows its ends, ports and speeds.
Elements named by a rule that did not pass are drawn red. Past ``group_above`` compute nodes, nodes are drawn one
marker per rack, links aggregated, and a leaf's healthy uplinks share one hover target (thousands of leaf-spine links
otherwise made the map ~1 MB).

The figure is a plain {data, layout} dict in Plotly's schema (see apps/core/charts.py): built and serialised through
plotly.graph_objects it cost ~80 ms at 512 nodes, as a dict ~30 ms; tests/topology/test_charts.py checks that Plotly
accepts it and builds the same figure.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import networkx as nx

from apps.core.charts import figure_json as figure_json  # re-exported: the page and bench/topology.py embed with it
from apps.core.units import link_rate
from apps.inventory.choices import NODE_STATUS_COLOURS, NodeRole, NodeStatus, Plane, SwitchTier
from apps.topology.graph import ClusterGraph, node_key, switch_key
from apps.topology.rules import RuleResult

GROUP_ABOVE = 64
MAX_CABLES_IN_HOVER = 8
MAX_CABLES_IN_HOVER_GROUPED = 3
COLOURS = {
    "green": "#1f9d55",
    "orange": "#d98a00",
    "red": "#d23b3b",
    "grey": "#8a93a6",
    "blue": "#2f6fdf",
    "purple": "#7d4cc2",
    "black": "#333333",
}
PLANE_COLOURS = {Plane.A: "#2f6fdf", Plane.B: "#e07b00", Plane.MANAGEMENT: "#9aa3b5"}
OTHER_COLOUR = "#555d70"
VIOLATION = "#d23b3b"
ROW_COMPUTE, ROW_LEAF, ROW_SPINE, ROW_MANAGEMENT_SWITCH, ROW_TOP = 0.0, 1.0, 2.0, 2.5, 3.0
ROW_CORE = 2.75  # a three-tier fabric's core, above its pods' spines
# Horizontal bands of the switch layer, by plane.
BANDS = {Plane.A: (0.02, 0.48), Plane.B: (0.52, 0.98), "": (0.3, 0.7)}


@dataclass
class _Vertex:
    key: str
    label: str
    kind: str  # compute, rack, switch, top
    x: float = 0.0
    y: float = 0.0
    colour: str = OTHER_COLOUR
    symbol: str = "circle"
    size: int = 10
    text: str = ""  # label drawn next to the marker (empty when the row is too crowded)
    textposition: str = "top center"
    hover: list[str] = field(default_factory=list)
    flagged: list[str] = field(default_factory=list)  # titles of the rules that name it


@dataclass
class _Link:
    a: str
    b: str
    capacity: float = 0.0
    installed: float = 0.0
    planes: set[str] = field(default_factory=set)
    cables: list = field(default_factory=list)
    cable_count: int = 0
    members: set[str] = field(default_factory=set)  # underlying nodes, when grouped
    flagged: bool = False

    @property
    def plane(self) -> str:
        return next(iter(self.planes)) if len(self.planes) == 1 else "mixed"


_fmt_gbps = link_rate  # the one way pages write a link's rate (apps.core.units)


def _width(capacity: float) -> float:
    if capacity <= 0:
        return 0.5
    return max(0.5, min(6.0, round((1 + 1.3 * math.log10(max(capacity, 1) / 100)) * 2) / 2))


def _spread(count: int, low: float, high: float) -> list[float]:
    return [low + (high - low) * (i + 0.5) / count for i in range(count)] if count else []


def _flags(cluster: ClusterGraph, results: Iterable[RuleResult]) -> tuple[dict[str, list[str]], set[frozenset]]:
    """Vertex keys named by rules that did not pass (with those rules' titles), and edges they name."""
    flagged: dict[str, list[str]] = defaultdict(list)
    edges: set[frozenset] = set()
    for result in results:
        if result.passed or result.verdict == "could-not-run":
            continue
        for element in result.offending:
            key = _element_key(cluster, element)
            if key and result.title not in flagged[key]:
                flagged[key].append(result.title)
        edges.update(frozenset(link) for link in result.links)
    return flagged, edges


def _element_key(cluster: ClusterGraph, element: str) -> str | None:
    if element in cluster.nodes:
        return node_key(element)
    if element in cluster.switches:
        return switch_key(element)
    for separator in (":", " "):
        host = element.split(separator, 1)[0]
        if host in cluster.nodes:
            return node_key(host)
    return None


def topology_figure(
    cluster: ClusterGraph, results: Iterable[RuleResult] = (), *, group_above: int = GROUP_ABOVE
) -> dict:
    """The map of the cluster as a {data, layout} figure, with the elements the given rule results name drawn red."""
    flagged, flagged_edges = _flags(cluster, results)
    compute = [node for node in cluster.nodes.values() if node.role == NodeRole.COMPUTE]
    grouped = len(compute) > group_above
    vertices: dict[str, _Vertex] = {}
    member_of: dict[str, str] = {}

    # Compute tier: one marker per node, or per rack when there are many, or per pod in a fabric of pods.
    compute.sort(key=lambda node: (node.rack, node.hostname))
    rack_spans: dict[str, list[float]] = defaultdict(list)
    pods = fabric_pods(cluster) if grouped else {}
    if pods:
        _place_pods(cluster, compute, pods, vertices, member_of, flagged)
    elif grouped:
        racks: dict[str, list] = defaultdict(list)
        for node in compute:
            racks[node.rack or "no rack"].append(node)
        every = -(-len(racks) // 16)  # label at most 16 racks; hover names every one
        for i, ((rack, members), x) in enumerate(zip(racks.items(), _spread(len(racks), 0, 1), strict=True)):
            key = f"rack:{rack}"
            vertex = _rack_vertex(key, rack, members, flagged)
            vertex.x, vertex.y = x, ROW_COMPUTE
            vertex.text, vertex.textposition = (vertex.label if i % every == 0 else ""), "bottom center"
            vertices[key] = vertex
            for node in members:
                member_of[node.key] = key
    else:
        for node, x in zip(compute, _spread(len(compute), 0, 1), strict=True):
            vertices[node.key] = _node_vertex(cluster, node, flagged, x, ROW_COMPUTE)
            member_of[node.key] = node.key
            rack_spans[node.rack or "no rack"].append(x)

    # Switch layer: each leaf above the nodes it serves (plane A just left of plane B); spines of plane A on the
    # left, of plane B on the right; the management switch between them.
    _place_switches(cluster, vertices, member_of, flagged, skip=set(member_of) if pods else set())

    # Management (and other non-compute) nodes on top.
    others = sorted(
        (node for node in cluster.nodes.values() if node.role != NodeRole.COMPUTE), key=lambda n: n.hostname
    )
    for node, x in zip(others, _spread(len(others), 0.3, 0.7), strict=True):
        vertex = _node_vertex(cluster, node, flagged, x, ROW_TOP)
        vertex.kind, vertex.symbol, vertex.size = "top", "diamond", 13
        vertex.text = node.hostname if len(others) <= 16 else ""
        vertices[node.key] = vertex
        member_of[node.key] = node.key

    limit = MAX_CABLES_IN_HOVER_GROUPED if grouped else MAX_CABLES_IN_HOVER
    links = _aggregate_links(cluster, member_of, flagged_edges, limit)
    traces = _link_traces(links, vertices, grouped) + _vertex_traces(vertices)
    layout = _layout(vertices, rack_spans, grouped, len(compute))
    if pods:
        layout["title"]["text"] = f"{len(compute)} compute nodes in {len(set(pods.values()))} pods — one marker per pod"
    return {"data": traces, "layout": layout}


def fabric_pods(cluster: ClusterGraph) -> dict[str, int]:
    """Where a core tier joins pods: each leaf and spine's pod (1, 2, …), found as the plane's leaf-and-spine graph
    without its cores falls apart, so it needs no naming convention. Empty for a fabric without a core."""
    if not any(switch.tier == SwitchTier.CORE for switch in cluster.switches.values()):
        return {}
    pods: dict[str, int] = {}
    for plane in (Plane.A, Plane.B):
        tiered = {
            switch.key
            for switch in cluster.switches.values()
            if switch.plane == plane and switch.tier in (SwitchTier.LEAF, SwitchTier.SPINE)
        }
        graph = nx.Graph()
        graph.add_nodes_from(tiered)
        graph.add_edges_from((u, v) for u, v, data in cluster.edges() if u in tiered and v in tiered)
        components = sorted((sorted(component) for component in nx.connected_components(graph)), key=lambda c: c[0])
        for number, component in enumerate(components, start=1):
            pods.update(dict.fromkeys(component, number))
    return pods


def _place_pods(cluster, compute: list, pods: dict[str, int], vertices, member_of, flagged) -> None:
    """One compute marker per pod, and per pod and plane one for its leaves and one for its spines; a plane's cores
    as one. The map of a 2,048-node fleet stays a few dozen markers; hovering one names what it holds."""
    by_pod: dict[int, list] = defaultdict(list)
    for node in compute:
        leaves = [switch_key(nic.switch) for nic in cluster.nics.get(node.hostname, []) if nic.is_data and nic.switch]
        by_pod[min((pods[leaf] for leaf in leaves if leaf in pods), default=0)].append(node)
    for (pod, members), x in zip(sorted(by_pod.items()), _spread(len(by_pod), 0, 1), strict=True):
        key = f"pod:{pod}"
        vertex = _rack_vertex(key, f"pod {pod}" if pod else "no pod", members, flagged)
        vertex.hover[0] = f"<b>Pod {pod}</b> · {len({node.rack for node in members})} racks" if pod else "<b>No pod</b>"
        vertex.x, vertex.y, vertex.textposition = x, ROW_COMPUTE, "bottom center"
        vertex.text, vertex.size = vertex.label, 26
        vertices[key] = vertex
        member_of.update(dict.fromkeys((node.key for node in members), key))
    groups: dict[tuple[str, str, int], list] = defaultdict(list)
    for switch in cluster.switches.values():
        if switch.key in pods:
            groups[(switch.tier, switch.plane, pods[switch.key])].append(switch)
        elif switch.tier == SwitchTier.CORE:
            groups[(switch.tier, switch.plane, 0)].append(switch)
    rows = {SwitchTier.LEAF: ROW_LEAF, SwitchTier.SPINE: ROW_SPINE, SwitchTier.CORE: ROW_CORE}
    for tier, plane in {(tier, plane) for tier, plane, _ in groups}:
        keys = sorted(key for key in groups if key[:2] == (tier, plane))
        for (_, _, pod), x in zip(keys, _spread(len(keys), *BANDS[plane]), strict=True):
            members = groups[(tier, plane, pod)]
            key = f"group:{tier}:{plane}:{pod}"
            plural = "leaves" if tier == SwitchTier.LEAF else f"{tier}s"
            label = f"{len(members)} {plural}" + (f" · pod {pod}" if pod else "")
            titles = sorted({title for switch in members for title in flagged.get(switch.key, [])})
            vertices[key] = _Vertex(
                key=key,
                label=label,
                kind="switch",
                x=x,
                y=rows[tier],
                symbol="square",
                size=16,
                colour=PLANE_COLOURS.get(plane, OTHER_COLOUR),
                text=label if len(keys) <= 8 else "",
                hover=[
                    f"<b>{label}</b>",
                    f"plane {plane}: {', '.join(s.name for s in members[:4])}" + (" …" if len(members) > 4 else ""),
                ],
                flagged=titles,
            )
            member_of.update(dict.fromkeys((switch.key for switch in members), key))


def _place_switches(
    cluster: ClusterGraph, vertices: dict[str, _Vertex], member_of: dict[str, str], flagged, skip: set[str]
) -> None:
    """Places each switch not in ``skip`` (those already drawn in a group)."""
    compute_x = {key: vertex.x for key, vertex in vertices.items()}
    rack_x: dict[str, list[float]] = defaultdict(list)
    for node in cluster.nodes.values():
        if node.key in member_of:
            rack_x[node.rack].append(compute_x[member_of[node.key]])
    columns = len({round(x, 6) for x in compute_x.values()}) or 1
    offset = min(0.012, 0.3 / columns)
    leaves: dict[str, list] = defaultdict(list)
    rows: dict[tuple[float, str], list] = defaultdict(list)
    for switch in sorted(cluster.switches.values(), key=lambda switch: (switch.rack, switch.name)):
        if switch.key in skip:
            continue
        band = switch.plane if switch.plane in (Plane.A, Plane.B) else ""
        if switch.tier == SwitchTier.LEAF and band:
            leaves[band].append(switch)
        elif switch.tier == SwitchTier.SPINE:
            rows[(ROW_SPINE, band)].append(switch)
        elif switch.tier == SwitchTier.CORE:
            rows[(ROW_CORE, band)].append(switch)
        else:
            rows[(ROW_MANAGEMENT_SWITCH, band)].append(switch)
    placed: list[tuple[object, float, float, str]] = []
    for band, members in leaves.items():
        served = []
        for switch in members:
            # Only compute nodes are placed yet: the leaf goes above the ones it serves.
            xs = [compute_x[member_of[other]] for other in cluster.graph[switch.key] if other in member_of]
            xs = xs or rack_x.get(switch.rack, [])
            served.append(sum(xs) / len(xs) if xs else None)
        fallback = iter(_spread(len(members), *BANDS[band]))
        crowded = len(members) > 16
        for switch, x in zip(members, served, strict=True):
            spare = next(fallback)
            x = spare if x is None else x + (-offset if band == Plane.A else offset)
            position = "top left" if band == Plane.A else "top right"
            placed.append((switch, x, ROW_LEAF, "" if crowded else position))
    for (row, band), members in rows.items():
        crowded = len(members) > 16
        for switch, x in zip(members, _spread(len(members), *BANDS[band]), strict=True):
            placed.append((switch, x, row, "" if crowded else "top center"))
    for switch, x, row, position in placed:
        vertices[switch.key] = _Vertex(
            key=switch.key,
            label=switch.name,
            kind="switch",
            x=x,
            y=row,
            symbol="square",
            size=12,
            colour=PLANE_COLOURS.get(switch.plane, OTHER_COLOUR),
            text=switch.name if position else "",
            textposition=position or "top center",
            hover=[f"<b>{switch.name}</b>", f"{switch.tier} · plane {switch.plane} · rack {switch.rack or '—'}"],
            flagged=flagged.get(switch.key, []),
        )
        member_of[switch.key] = switch.key


def _node_vertex(cluster, node, flagged, x: float, y: float) -> _Vertex:
    data_links = [nic for nic in cluster.nics.get(node.hostname, []) if nic.is_data and nic.switch]
    hover = [
        f"<b>{node.hostname}</b>",
        f"{node.role} · {node.status} · rack {node.rack or '—'}",
        f"{node.gpu_count} GPUs · {len(data_links)} data links",
    ]
    return _Vertex(
        key=node.key,
        label=node.hostname,
        kind="compute",
        x=x,
        y=y,
        size=10,
        colour=COLOURS.get(NODE_STATUS_COLOURS.get(node.status, "grey"), OTHER_COLOUR),
        hover=hover,
        flagged=flagged.get(node.key, []),
    )


def _rack_vertex(key: str, rack: str, members: list, flagged) -> _Vertex:
    statuses: dict[str, int] = defaultdict(int)
    for node in members:
        statuses[node.status] += 1
    worst = max(statuses, key=lambda status: statuses[status])
    bad = [node.hostname for node in members if flagged.get(node.key)]
    titles = sorted({title for node in members for title in flagged.get(node.key, [])})
    hover = [
        f"<b>Rack {rack}</b>",
        f"{len(members)} compute nodes: "
        + ", ".join(f"{count} {status}" for status, count in sorted(statuses.items())),
        f"{sum(node.gpu_count for node in members)} GPUs",
    ]
    if bad:
        hover.append(f"{len(bad)} named by rules: " + ", ".join(bad[:6]) + (" …" if len(bad) > 6 else ""))
    return _Vertex(
        key=key,
        label=f"{rack} ({len(members)})",
        kind="rack",
        symbol="circle",
        size=14 + min(len(members), 16) // 2,
        colour=COLOURS.get(NODE_STATUS_COLOURS.get(worst, "grey"), OTHER_COLOUR),
        hover=hover,
        flagged=titles,
    )


def _aggregate_links(
    cluster: ClusterGraph, member_of: dict[str, str], flagged_edges: set[frozenset], limit: int
) -> list[_Link]:
    links: dict[tuple[str, str], _Link] = {}
    for u, v, data in cluster.edges():
        a, b = member_of.get(u), member_of.get(v)
        if not a or not b or a == b:
            continue
        a, b = sorted((a, b))
        link = links.get((a, b))
        if link is None:
            link = links[(a, b)] = _Link(a=a, b=b)
        link.capacity += data["capacity_gbps"]
        link.installed += data["installed_gbps"]
        link.planes.update(data["planes"])
        link.cable_count += len(data["cables"])
        if len(link.cables) < limit:
            link.cables.extend(data["cables"][: limit - len(link.cables)])
        link.members.update(key for key in (u, v) if key.startswith("node:"))
        if frozenset((u, v)) in flagged_edges:
            link.flagged = True
    return list(links.values())


def _link_hover(link: _Link, vertices: dict[str, _Vertex], grouped: bool) -> str:
    a, b = vertices[link.a], vertices[link.b]
    lines = [
        f"<b>{a.label} ↔ {b.label}</b>",
        f"plane {link.plane} · {link.cable_count} cable{'s' if link.cable_count != 1 else ''} · "
        f"{_fmt_gbps(link.capacity)} up of {_fmt_gbps(link.installed)}",
    ]
    if grouped and (a.kind == "rack" or b.kind == "rack"):
        nodes = sum(1 for key in link.members if key.startswith("node:"))
        lines.append(f"{nodes} nodes")
    for cable in link.cables:
        state = "" if cable.up else " <b>down</b>"
        lines.append(f"{cable.a} → {cable.b} · {link_rate(cable.speed_gbps)} {cable.medium}{state}")
    if link.cable_count > len(link.cables):
        lines.append(f"… {link.cable_count - len(link.cables)} more")
    if link.flagged:
        lines.append("<b>named by a rule that failed</b>")
    return "<br>".join(lines)


def _link_traces(links: list[_Link], vertices: dict[str, _Vertex], grouped: bool) -> list[dict]:
    buckets: dict[tuple[str, float, bool], list[_Link]] = defaultdict(list)
    for link in links:
        buckets[(link.plane, _width(link.installed), link.flagged)].append(link)
    traces: list[dict] = []
    legend_seen: set[str] = set()
    uplinks: dict[str, list[_Link]] = defaultdict(list)  # healthy switch-to-switch links, by plane (grouped maps)
    order = {Plane.A: 0, Plane.B: 1, Plane.MANAGEMENT: 2}
    for (plane, width, flagged), members in sorted(
        buckets.items(), key=lambda item: (order.get(item[0][0], 3), item[0])
    ):
        group = "violations" if flagged else f"plane-{plane}"
        name = "Links named by rules" if flagged else _plane_label(plane)
        xs: list[float | None] = []
        ys: list[float | None] = []
        for link in members:
            a, b = vertices[link.a], vertices[link.b]
            xs += [round(a.x, 4), round(b.x, 4), None]
            ys += [round(a.y, 4), round(b.y, 4), None]
        visible = "legendonly" if plane == Plane.MANAGEMENT and not flagged else True
        traces.append(
            {
                "type": "scatter",
                "x": xs,
                "y": ys,
                "mode": "lines",
                "name": name,
                "legendgroup": group,
                "showlegend": group not in legend_seen,
                "line": {"color": VIOLATION if flagged else PLANE_COLOURS.get(plane, OTHER_COLOUR), "width": width},
                "opacity": 0.9 if flagged else 0.55,
                "hoverinfo": "skip",
                "visible": visible,
            }
        )
        legend_seen.add(group)
        if grouped and not flagged:
            # Hundreds of leaves times dozens of spines: a healthy uplink gets no hover target of its own; its leaf's
            # uplinks are summed up in one (below). Links named by rules (or with less capacity up than installed)
            # keep their own.
            quiet = [link for link in members if _is_quiet_uplink(link, vertices)]
            for link in quiet:
                uplinks[plane].append(link)
            members = [link for link in members if not _is_quiet_uplink(link, vertices)]
            if not members:
                continue
        # Hover targets at the links' midpoints (lines themselves only hover at their ends).
        traces.append(
            {
                "type": "scatter",
                # Four decimals place a point to a tenth of a pixel on any screen; more only fattens the page.
                "x": [round((vertices[link.a].x + vertices[link.b].x) / 2, 4) for link in members],
                "y": [round((vertices[link.a].y + vertices[link.b].y) / 2, 4) for link in members],
                "mode": "markers",
                "legendgroup": group,
                "showlegend": False,
                "visible": visible,
                "name": name,
                "marker": {
                    "size": 9,
                    "color": VIOLATION if flagged else PLANE_COLOURS.get(plane, OTHER_COLOUR),
                    "opacity": 0,
                },
                "hovertext": [_link_hover(link, vertices, grouped) for link in members],
                "hoverinfo": "text",
            }
        )
    for plane, links_of_plane in sorted(uplinks.items(), key=lambda item: (order.get(item[0], 3), item[0])):
        traces.append(_uplink_summary_trace(plane, links_of_plane, vertices))
    return traces


def _is_quiet_uplink(link: _Link, vertices: dict[str, _Vertex]) -> bool:
    """A link between two switches with every cable up and not named by a rule: nothing to point at one by one."""
    ends = (vertices[link.a], vertices[link.b])
    return not link.flagged and link.capacity >= link.installed and all(end.kind == "switch" for end in ends)


def _uplink_summary_trace(plane: str, links: list[_Link], vertices: dict[str, _Vertex]) -> dict:
    """One hover target per lower switch (a leaf) over its healthy uplinks: how many, to what, cables, capacity."""
    by_lower: dict[str, list[_Link]] = defaultdict(list)
    for link in links:
        a, b = vertices[link.a], vertices[link.b]
        lower, upper = (a, b) if a.y <= b.y else (b, a)
        by_lower[lower.key].append(link)
    xs, ys, texts = [], [], []
    for key, members in by_lower.items():
        lower = vertices[key]
        uppers = sorted(vertices[link.b if link.a == key else link.a].label for link in members)
        cables = sum(link.cable_count for link in members)
        capacity = sum(link.capacity for link in members)
        shown = ", ".join(uppers[:4]) + (f" … {len(uppers) - 4} more" if len(uppers) > 4 else "")
        xs.append(round(lower.x, 4))
        ys.append(round(lower.y + 0.2, 4))
        texts.append(
            f"<b>{lower.label} uplinks</b><br>plane {plane} · {len(members)} link{'s' if len(members) != 1 else ''}"
            f" · {cables} cable{'s' if cables != 1 else ''} · {_fmt_gbps(capacity)}, all up<br>to {shown}"
        )
    colour = PLANE_COLOURS.get(plane, OTHER_COLOUR)
    return {
        "type": "scatter",
        "x": xs,
        "y": ys,
        "mode": "markers",
        "legendgroup": f"plane-{plane}",
        "showlegend": False,
        "visible": "legendonly" if plane == Plane.MANAGEMENT else True,
        "name": _plane_label(plane),
        "marker": {"size": 9, "color": colour, "opacity": 0},
        "hovertext": texts,
        "hoverinfo": "text",
    }


def colour_key() -> dict[str, list[tuple[str, str]]]:
    """What the map's colours mean, for the key under it: a node's (or a rack's worst node's) status, a switch's and
    a link's plane, and red for what a failing rule names (Plotly's legend lists the traces, not these colours)."""
    return {
        "status": [
            (NodeStatus(status).label, COLOURS.get(colour, OTHER_COLOUR))
            for status, colour in NODE_STATUS_COLOURS.items()
        ],
        "plane": [
            (f"Plane {plane}" if plane in (Plane.A, Plane.B) else "Management", colour)
            for plane, colour in PLANE_COLOURS.items()
        ],
        "rule": [("Named by a failing rule", VIOLATION)],
    }


def _plane_label(plane: str) -> str:
    if plane == Plane.MANAGEMENT:
        return "Management links"
    return f"Plane {plane} links" if plane in (Plane.A, Plane.B) else "Other links"


def _vertex_traces(vertices: dict[str, _Vertex]) -> list[dict]:
    kinds = [
        ("compute", "Compute nodes"),
        ("rack", "Racks of compute nodes"),
        ("switch", "Switches"),
        ("top", "Management nodes"),
    ]
    traces = []
    for kind, name in kinds:
        members = [vertex for vertex in vertices.values() if vertex.kind == kind]
        if not members:
            continue
        labelled = any(v.text for v in members)
        trace = {
            "type": "scatter",
            "x": [v.x for v in members],
            "y": [v.y for v in members],
            "mode": "markers+text" if labelled else "markers",
            "name": name,
            "textfont": {"size": 10},
            "marker": {
                "size": [v.size for v in members],
                "color": [v.colour for v in members],
                "symbol": [v.symbol for v in members],
                "line": {"color": "#ffffff", "width": 1},
            },
            "hovertext": [_vertex_hover(v) for v in members],
            "hoverinfo": "text",
        }
        if labelled:
            trace["text"] = [v.text for v in members]
            trace["textposition"] = [v.textposition for v in members]
        traces.append(trace)
    flagged = [vertex for vertex in vertices.values() if vertex.flagged]
    if flagged:
        traces.append(
            {
                "type": "scatter",
                "x": [v.x for v in flagged],
                "y": [v.y for v in flagged],
                "mode": "markers",
                "name": "Named by rules",
                "marker": {
                    "size": [v.size + 4 for v in flagged],
                    "color": VIOLATION,
                    "symbol": [v.symbol for v in flagged],
                    "line": {"color": "#7a0f0f", "width": 2},
                },
                "hovertext": [_vertex_hover(v) for v in flagged],
                "hoverinfo": "text",
            }
        )
    return traces


def _vertex_hover(vertex: _Vertex) -> str:
    lines = list(vertex.hover)
    lines += [f"<b>✗ {title}</b>" for title in vertex.flagged]
    return "<br>".join(lines)


def _layout(vertices: dict[str, _Vertex], rack_spans: dict[str, list[float]], grouped: bool, compute: int) -> dict:
    annotations = [
        {
            "x": 0.25,
            "y": ROW_SPINE + 0.35,
            "text": "<b>Plane A</b>",
            "showarrow": False,
            "font": {"color": PLANE_COLOURS[Plane.A]},
        },
        {
            "x": 0.75,
            "y": ROW_SPINE + 0.35,
            "text": "<b>Plane B</b>",
            "showarrow": False,
            "font": {"color": PLANE_COLOURS[Plane.B]},
        },
    ]
    for rack, xs in rack_spans.items():
        annotations.append(
            {
                "x": sum(xs) / len(xs),
                "y": ROW_COMPUTE - 0.25,
                "text": rack,
                "showarrow": False,
                "font": {"size": 11, "color": "#677086"},
            }
        )
    title = f"{compute} compute nodes" + (" — one marker per rack" if grouped else "")
    rows = [(ROW_COMPUTE, "Compute"), (ROW_LEAF, "Leaves"), (ROW_SPINE, "Spines"), (ROW_TOP, "Management")]
    if any(vertex.kind == "switch" and vertex.y == ROW_CORE for vertex in vertices.values()):
        rows.insert(3, (ROW_CORE, "Core"))
    return {
        "title": {"text": title, "font": {"size": 13}, "x": 0.01},
        "height": 640,
        "margin": {"l": 90, "r": 20, "t": 70, "b": 30},
        "showlegend": True,
        "legend": {"orientation": "h", "y": 1.07, "x": 0.2},
        "hovermode": "closest",
        "hoverlabel": {"align": "left"},
        "plot_bgcolor": "#ffffff",
        "xaxis": {"visible": False, "range": [-0.02, 1.02], "fixedrange": False},
        "yaxis": {
            "range": [-0.45, ROW_TOP + 0.45],
            "tickvals": [row for row, _ in rows],
            "ticktext": [name for _, name in rows],
            "showgrid": False,
            "zeroline": False,
        },
        "annotations": annotations,
    }
