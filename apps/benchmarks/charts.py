"""Benchmark figures, built here with Plotly and embedded by the templates with json_script (static/js/charts.js).

* busbw vs message size (log x): one line per test, the reference's three tiers as a band (expected, warn, fail)
  over the sizes it applies to, and the accepted baseline as a dashed line;
* the sweep's node × node heatmap: each cell is the busbw of the smallest test that held both nodes (a pair, or
  the group they were tested in), suspects marked on both axes with their NIC, cable and switch port, each
  suspect's marker linked to its node page; past 256 nodes, its rows are groups of consecutive nodes.
"""

from __future__ import annotations

import plotly.graph_objects as go

from apps.core import units
from apps.core.charts import figure_json as figure_json  # re-exported: the views embed with it
from apps.core.text import counted

COLOURS = {"pass": "#1f9d55", "warn": "#d98a00", "fail": "#d23b3b", "could_not_run": "#8a93a6"}
MAX_LINES = 24


def _size_axis(sizes: list[int] | None = None) -> dict:
    """A log axis of message sizes labelled in bytes' units (1 KiB, 4 MiB, 1 GiB), not Plotly's SI numbers ("1B" for
    a gigabyte, "4.5B"): a tick at each power of two of the sizes, every second or fourth one when they span many."""
    if sizes:
        low, high = min(sizes).bit_length() - 1, max(sizes).bit_length() - 1
    else:  # the live plot, before its rows: nccl-tests' usual 8 B to 8 GiB
        low, high = 3, 33
    step = 1 if high - low <= 8 else 2 if high - low <= 16 else 4
    ticks = [2**k for k in range(low, high + 1, step)]
    return {"type": "log", "title": "message size", "tickvals": ticks, "ticktext": [units.size(t) for t in ticks]}


def live_busbw_figure() -> go.Figure:
    """The run page's live plot before any row: the axes of busbw_figure; static/js/benchmark_live.js adds a line
    per test and a point per nccl-tests row as the round jobs' output arrives."""
    figure = go.Figure()
    figure.update_layout(
        xaxis=_size_axis(),
        yaxis={"title": "bus bandwidth (GB/s)", "rangemode": "tozero"},
        margin={"l": 60, "r": 20, "t": 30, "b": 50},
        showlegend=True,
    )
    return figure


def hosts_label(hosts: list[str]) -> str:
    """A test's nodes as its line or bar is named: "gpu001+gpu009", or "gpu001 +7" for a larger set."""
    return "+".join(hosts) if len(hosts) <= 3 else f"{hosts[0]} +{len(hosts) - 1}"


def busbw_figure(tests, *, reference=None, baseline_gb_per_s: float | None = None) -> go.Figure:
    """Bus bandwidth against message size for each test (its series), with the reference band and the baseline."""
    figure = go.Figure()
    sizes = sorted({row["size_bytes"] for test in tests for row in test.series})
    for test in list(tests)[:MAX_LINES]:
        rows = [row for row in test.series if row["busbw_gb_per_s"] is not None]
        name = hosts_label(test.hosts)
        figure.add_trace(
            go.Scatter(
                x=[row["size_bytes"] for row in rows],
                y=[row["busbw_gb_per_s"] for row in rows],
                mode="lines+markers",
                name=f"{name} ({test.verdict})",
                line={"color": COLOURS.get(test.verdict)},
                text=[units.size(row["size_bytes"]) for row in rows],
                hovertemplate="%{text}: %{y:.1f} GB/s<extra>" + name + "</extra>",
            )
        )
    if reference is not None and sizes:
        start = max(reference.min_size_bytes, sizes[0])
        end = max(sizes[-1], start)
        for low, high, colour, label in (
            (reference.warn_gb_per_s, reference.expected_gb_per_s, "rgba(31,157,85,0.12)", "pass"),
            (reference.fail_gb_per_s, reference.warn_gb_per_s, "rgba(217,138,0,0.15)", "warn"),
        ):
            figure.add_shape(
                type="rect",
                xref="x",
                yref="y",
                x0=start,
                x1=end,
                y0=low,
                y1=high,
                fillcolor=colour,
                line={"width": 0},
                layer="below",
                name=label,
            )
        figure.add_trace(
            go.Scatter(
                x=[start, end],
                y=[reference.expected_gb_per_s] * 2,
                mode="lines",
                name=f"expected {reference.expected_gb_per_s:g} GB/s",
                line={"color": "#1f9d55", "dash": "dot"},
            )
        )
    if baseline_gb_per_s and sizes:
        figure.add_trace(
            go.Scatter(
                x=[sizes[0], sizes[-1]],
                y=[baseline_gb_per_s] * 2,
                mode="lines",
                name=f"baseline {baseline_gb_per_s:g} GB/s",
                line={"color": "#2f6fdf", "dash": "dash"},
            )
        )
    figure.update_layout(
        xaxis=_size_axis(sizes),
        yaxis={"title": "bus bandwidth (GB/s)", "rangemode": "tozero"},
        margin={"l": 60, "r": 20, "t": 30, "b": 50},
        legend={"orientation": "h"},
        height=420,
    )
    return figure


HEATMAP_ROWS = 256  # past this many nodes, the heatmap's rows are groups of consecutive nodes


def sweep_heatmap(hosts: list[str], tests, suspects, *, node_url=None, max_rows: int = HEATMAP_ROWS) -> dict:
    """Node × node, as figure JSON: the busbw of the smallest test that held both nodes; suspects marked and labelled.

    Past `max_rows` nodes each row is a group of consecutive nodes (2,048 nodes: 256 rows of 8, "gpu001–gpu008"), and
    a cell is the busbw of the smallest test that held a node of each group (two of the group on the diagonal): the
    halving narrows to the slow node's row as it does node by node, and the page stays the size of a 256-node sweep's
    (4 million cells would be ~50 MB of figure and a map 28,000 pixels high).

    At 256 rows that is 65,536 cells. The hover is one template over the cell's value and its test's width
    (`customdata`), not a string per cell (4 MiB of figure); and the two matrices join the figure after plotly has
    built and serialised the rest, since its validation and deep copies of them cost a second of CPU at that size
    (they are plain lists of numbers and None: nothing there for it to check)."""
    per_row = -(-len(hosts) // max_rows) if len(hosts) > max_rows else 1
    labels = _row_labels(hosts, per_row)
    row_of = {host: position // per_row for position, host in enumerate(hosts)}
    size = len(labels)
    values: list[list[float | None]] = [[None] * size for _ in range(size)]
    widths = [[0] * size for _ in range(size)]
    for test in sorted(tests, key=lambda test: -len(test.hosts)):  # smaller tests overwrite larger ones
        if test.busbw_gb_per_s is None:
            continue
        held: dict[int, int] = {}  # row -> how many of the test's nodes it holds
        for host in test.hosts:
            if host in row_of:
                held[row_of[host]] = held.get(row_of[host], 0) + 1
        value, width = round(test.busbw_gb_per_s, 1), len(test.hosts)
        for a in held:
            row, row_widths = values[a], widths[a]
            for b in held:
                if a != b or held[a] > 1:  # a node with itself is no pair
                    row[b] = value
                    row_widths[b] = width
    of_what = "nodes" if per_row == 1 else "nodes; the smallest across these groups"
    figure = go.Figure(
        go.Heatmap(
            x=labels,
            y=labels,
            colorscale="RdYlGn",
            colorbar={"title": "GB/s"},
            hovertemplate=f"%{{y}} × %{{x}}: %{{z:.1f}} GB/s (test of %{{customdata}} {of_what})<extra></extra>",
            hoverongaps=False,  # cells of nodes never tested together
        )
    )
    marked = [suspect for suspect in suspects if suspect.node.hostname in row_of]
    if marked:
        at = [labels[row_of[s.node.hostname]] for s in marked]
        hover = [
            f"{s.node.hostname}: {s.nic} · cable {s.cable} · {s.switch} {s.switch_port}<br>{s.cause}" for s in marked
        ]
        links = [node_url(s.node) if node_url else "" for s in marked]
        figure.add_trace(
            go.Scatter(
                x=at,
                y=at,
                mode="markers+text",
                marker={"symbol": "x", "size": 14, "color": "#111"},
                text=[f"{s.node.hostname} {s.nic}" for s in marked],
                textposition="top right",
                hovertext=hover,
                hoverinfo="text",
                customdata=links,
                name="suspects",
            )
        )
    figure.update_layout(
        xaxis={"tickangle": -60, "type": "category"},
        yaxis={"autorange": "reversed", "type": "category"},
        margin={"l": 80 if per_row == 1 else 130, "r": 20, "t": 30, "b": 80 if per_row == 1 else 130},
        height=max(420, 14 * size + 140),
        showlegend=False,
    )
    built = figure_json(figure)
    built["data"][0] |= {"z": values, "customdata": widths}
    return built


def _row_labels(hosts: list[str], per_row: int) -> list[str]:
    """Each row's label: its node, or its group's first and last ("gpu001–gpu008")."""
    if per_row == 1:
        return list(hosts)
    groups = [hosts[start : start + per_row] for start in range(0, len(hosts), per_row)]
    return [group[0] if len(group) == 1 else f"{group[0]}–{group[-1]}" for group in groups]


# --- the per-node suites ------------------------------------------------------------------------------------------


def _reference_lines(figure: go.Figure, reference, *, label_x: float = 1.0) -> None:
    if reference is None:
        return
    # Each tier's label in the margin right of the plot, level with its line: inside, the labels sat on the bars.
    for value, colour, label in (
        (reference.expected, "#1f9d55", "expected"),
        (reference.warn_below, "#d98a00", "warn below"),
        (reference.fail_below, "#d23b3b", "fail below"),
    ):
        figure.add_hline(y=value, line={"color": colour, "dash": "dot", "width": 1})
        figure.add_annotation(
            xref="paper", x=label_x, xanchor="left", y=value, yanchor="middle", showarrow=False,
            text=f"{label} {value:,.0f}", font={"size": 11, "color": colour},
        )  # fmt: skip


def per_node_bar_figure(measurements, *, reference=None, title: str = "") -> go.Figure:
    """One bar per node (or host set) for one figure, coloured by verdict, with the reference's tiers and each
    bar's accepted baseline as a marker."""
    items = [item for item in measurements if item.value is not None]
    labels = [hosts_label(item.hosts) for item in items]
    unit = items[0].unit if items else ""
    figure = go.Figure(
        go.Bar(
            x=labels,
            y=[item.value for item in items],
            marker={"color": [COLOURS.get(item.verdict) for item in items]},
            text=[item.get_verdict_display() for item in items],
            hovertemplate="%{x}: %{y:,.0f} " + unit + " (%{text})<extra></extra>",
            name=title,
        )
    )
    baselines = [(label, item.baseline_value) for label, item in zip(labels, items, strict=True) if item.baseline_value]
    if baselines:
        figure.add_trace(
            go.Scatter(
                x=[label for label, _ in baselines],
                y=[value for _, value in baselines],
                mode="markers",
                marker={"symbol": "line-ew-open", "size": 24, "color": "#2f6fdf"},
                name="baseline",
            )
        )
    _reference_lines(figure, reference)
    figure.update_layout(
        title=title,
        xaxis={"type": "category", "tickangle": -45},
        yaxis={"title": unit, "rangemode": "tozero"},
        margin={"l": 70, "r": 150 if reference is not None else 20, "t": 40, "b": 80},
        showlegend=bool(baselines),
        height=400,
    )
    return figure


def matrix_heatmap(measurement) -> go.Figure:
    """An nvbandwidth matrix: rows and columns as the tool labels them (GPU or CPU), each cell's GB/s written in."""
    matrix = measurement.series.get("matrix") or []
    rows = measurement.series.get("rows") or [str(row) for row in range(len(matrix))]
    columns = measurement.series.get("columns") or [str(column) for column in range(len(matrix[0]) if matrix else 0)]
    # Colours against the reference (red at its fail tier, green from its expected figure up), not the matrix's own
    # spread: 390.9 to 393.2 GB/s, all passing, went from dark red to dark green.
    values = [value for row in matrix for value in row if value is not None]
    reference = measurement.reference
    if reference is not None:
        low, high = reference.fail_below, reference.expected
    else:
        low, high = 0.0, max(values, default=1.0)
    figure = go.Figure(
        go.Heatmap(
            z=matrix,
            zmin=low,
            zmax=high,
            x=[f"GPU {column}" for column in columns],
            y=[f"{'CPU' if len(matrix) == 1 else 'GPU'} {row}" for row in rows],
            colorscale="RdYlGn",
            colorbar={"title": measurement.unit},
            text=[["" if value is None else f"{value:.1f}" for value in row] for row in matrix],
            texttemplate="%{text}",
            hovertemplate="%{y} → %{x}: %{z:.2f} " + measurement.unit + "<extra></extra>",
        )
    )
    figure.update_layout(
        title=f"{measurement.launcher}: {measurement.case}",
        xaxis={"type": "category"},
        yaxis={"type": "category", "autorange": "reversed"},
        margin={"l": 70, "r": 20, "t": 40, "b": 50},
        height=max(260, 40 * len(matrix) + 120),
    )
    return figure


def soak_figure(measurement) -> go.Figure:
    """A soak on one node: each GPU's SM clock (solid) and temperature (dotted, right axis) against time, thermal
    slowdown samples marked."""
    figure = go.Figure()
    for index, entry in sorted((measurement.series.get("gpus") or {}).items(), key=lambda item: int(item[0])):
        figure.add_trace(
            go.Scatter(x=entry["t"], y=entry["sm_mhz"], mode="lines", name=f"GPU {index} SM MHz", legendgroup=index)
        )
        figure.add_trace(
            go.Scatter(
                x=entry["t"],
                y=entry["temperature_c"],
                mode="lines",
                line={"dash": "dot", "width": 1},
                name=f"GPU {index} °C",
                legendgroup=index,
                yaxis="y2",
                visible="legendonly",
            )
        )
        hot = [
            (t, clock)
            for t, clock, reasons in zip(entry["t"], entry["sm_mhz"], entry["reasons"], strict=True)
            if any("thermal" in reason for reason in reasons or [])
        ]
        if hot:
            figure.add_trace(
                go.Scatter(
                    x=[t for t, _ in hot],
                    y=[clock for _, clock in hot],
                    mode="markers",
                    marker={"color": "#d23b3b", "symbol": "x", "size": 7},
                    name=f"GPU {index} thermal slowdown",
                    legendgroup=index,
                )
            )
    _reference_lines(figure, measurement.reference, label_x=1.08)  # right of the °C axis
    figure.update_layout(
        title=f"{measurement.launcher}: SM clock and temperature under gpu_burn",
        xaxis={"title": "seconds into the soak"},
        yaxis={"title": "SM clock (MHz)", "rangemode": "tozero"},
        yaxis2={"title": "°C", "overlaying": "y", "side": "right", "rangemode": "tozero"},
        margin={"l": 70, "r": 190 if measurement.reference is not None else 60, "t": 40, "b": 50},
        legend={"orientation": "h"},
        height=440,
    )
    return figure


TIMELINE_PARTS = (
    ("compute only", "#3b6fd2"),
    ("compute + communication (overlap)", "#7d5fc9"),
    ("communication (exposed)", "#d23b3b"),
    ("idle", "#c9ced8"),
)


def _parts(row: dict) -> tuple[float, float, float, float]:
    """A step's (or a rank's mean step's) four stacked parts in ms; they add up to its step time."""
    overlap = row["overlap_us"]
    return (
        (row["compute_us"] - overlap) / 1000,
        overlap / 1000,
        (row["communication_us"] - overlap) / 1000,
        row["idle_us"] / 1000,
    )


def timeline_step_figure(analysis, *, rank: int | None = None) -> go.Figure:
    """The stacked compute / overlap / exposed communication / idle bar per step: one rank's steps, or the mean
    over the ranks of each step; each bar's height is the step time."""
    ranks = analysis.series.get("ranks", [])
    chosen = [item for item in ranks if rank is None or item["rank"] == rank]
    by_step: dict[str, list[dict]] = {}
    for item in chosen:
        for step in item["steps"]:
            by_step.setdefault(step["step"], []).append(step)
    labels = list(by_step)
    figure = go.Figure()
    for position, (name, colour) in enumerate(TIMELINE_PARTS):
        values = [sum(_parts(step)[position] for step in by_step[label]) / len(by_step[label]) for label in labels]
        figure.add_trace(
            go.Bar(
                x=[f"step {label}" for label in labels],
                y=[round(value, 3) for value in values],
                name=name,
                marker={"color": colour},
                hovertemplate="%{x}: %{y:.2f} ms<extra>" + name + "</extra>",
            )
        )
    who = f"rank {rank}" if rank is not None else f"mean of {counted(len(chosen), 'rank')}"
    figure.update_layout(
        barmode="stack",
        title=f"{analysis.name}: time per step ({who})",
        yaxis={"title": "ms"},
        legend={"orientation": "h"},
        margin={"t": 50, "r": 20},
    )
    return figure


def timeline_rank_figure(analysis) -> go.Figure:
    """The same four parts for each rank's mean step, the slowest rank marked."""
    ranks = analysis.series.get("ranks", [])
    figure = go.Figure()
    labels = [f"rank {item['rank']}" for item in ranks]
    for position, (name, colour) in enumerate(TIMELINE_PARTS):
        figure.add_trace(
            go.Bar(
                x=labels,
                y=[round(_parts(item)[position], 3) for item in ranks],
                name=name,
                marker={"color": colour},
                hovertemplate="%{x}: %{y:.2f} ms<extra>" + name + "</extra>",
            )
        )
    if analysis.slowest_rank is not None and len(ranks) > 1:
        figure.add_annotation(x=f"rank {analysis.slowest_rank}", yref="paper", y=1.02, text="slowest", showarrow=False)
    figure.update_layout(
        barmode="stack",
        title="mean step per rank",
        yaxis={"title": "ms"},
        legend={"orientation": "h"},
        margin={"t": 50, "r": 20},
    )
    return figure
