"""Telemetry figures, built with Plotly and embedded by the templates with json_script (static/js/charts.js)."""

from __future__ import annotations

import datetime as dt
import json

import plotly.graph_objects as go

from apps.monitoring.telemetry import Series
from apps.simulator.model import REASON_BITS

HEIGHT = 280


def figure_json(figure: go.Figure) -> dict:
    return json.loads(figure.to_json())


def _times(series: Series) -> list[str]:
    return [dt.datetime.fromtimestamp(t, tz=dt.UTC).isoformat() for t, _ in series.points]


def _layout(figure: go.Figure, *, title: str, y_title: str, y_range=None) -> go.Figure:
    figure.update_layout(
        title={"text": title, "font": {"size": 14}},
        height=HEIGHT,
        margin={"l": 50, "r": 10, "t": 36, "b": 30},
        yaxis={"title": y_title, **({"range": y_range} if y_range else {})},
        legend={"orientation": "h", "y": -0.2},
        hovermode="x unified",
    )
    return figure


def _gpu_name(series: Series) -> str:
    return f"GPU {series.labels.get('gpu', '')}" if series.labels.get("gpu") else "all GPUs"


def gpu_lines(series: list[Series], *, title: str, y_title: str, scale: float = 1.0, y_range=None) -> go.Figure:
    figure = go.Figure()
    for one in sorted(series, key=lambda s: int(s.labels.get("gpu") or 0)):
        figure.add_trace(
            go.Scatter(x=_times(one), y=[v * scale for v in one.values()], mode="lines", name=_gpu_name(one))
        )
    return _layout(figure, title=title, y_title=y_title, y_range=y_range)


def utilisation_figure(util: list[Series], sm_active: list[Series]) -> go.Figure:
    """GPU utilisation (the share of time a kernel ran) beside SM active (the share of SMs busy): a card can be
    100% 'utilised' with its SMs half idle, which only the second shows."""
    figure = go.Figure()
    for one in util:
        figure.add_trace(go.Scatter(x=_times(one), y=one.values(), mode="lines", name=f"utilisation {_gpu_name(one)}"))
    for one in sm_active:
        figure.add_trace(
            go.Scatter(
                x=_times(one),
                y=[100 * v for v in one.values()],
                mode="lines",
                line={"dash": "dot"},
                name=f"SM active {_gpu_name(one)}",
            )
        )
    return _layout(figure, title="Utilisation and SM active", y_title="%", y_range=[0, 105])


def reasons_in(series: list[Series]) -> list[str]:
    """The clocks-event reasons set at any point of the window, by name."""
    seen = 0
    for one in series:
        for value in one.values():
            seen |= int(value)
    return [name for name, bit in REASON_BITS.items() if seen & bit]


def xid_figure(series: list[Series]) -> go.Figure:
    figure = go.Figure()
    for one in series:
        points = [(t, v) for t, v in one.points if v]
        if points:
            times = _times(Series(one.labels, points))
            figure.add_trace(
                go.Scatter(
                    x=times,
                    y=[v for _, v in points],
                    mode="markers",
                    name=f"{one.labels.get('Hostname', '')} {_gpu_name(one)}",
                )
            )
    return _layout(figure, title="XID errors", y_title="XID")


def service_figure(tokens: Series, p99: Series, *, design: float, target_ms: float, name: str) -> go.Figure:
    """Tokens/s against the design throughput, and p99 latency against its target on a second axis."""
    figure = go.Figure()
    figure.add_trace(go.Scatter(x=_times(tokens), y=tokens.values(), mode="lines", name="tokens/s"))
    if tokens.points:
        figure.add_trace(
            go.Scatter(
                x=[_times(tokens)[0], _times(tokens)[-1]],
                y=[design, design],
                mode="lines",
                line={"dash": "dash", "color": "#8a93a6"},
                name="design tokens/s",
            )
        )
    figure.add_trace(
        go.Scatter(x=_times(p99), y=[1000 * v for v in p99.values()], mode="lines", name="p99 ms", yaxis="y2")
    )
    if p99.points:
        figure.add_trace(
            go.Scatter(
                x=[_times(p99)[0], _times(p99)[-1]],
                y=[target_ms, target_ms],
                mode="lines",
                line={"dash": "dash", "color": "#d23b3b"},
                name="p99 target",
                yaxis="y2",
            )
        )
    _layout(figure, title=f"{name}: tokens/s and p99 latency", y_title="tokens/s")
    figure.update_layout(yaxis2={"title": "p99 ms", "overlaying": "y", "side": "right", "rangemode": "tozero"})
    return figure


GPU_HOURS_PARTS = (
    ("busy", "busy (SM active)", "#2e7d32"),
    ("allocated_idle", "allocated, idle", "#f9a825"),
    ("unallocated", "unallocated", "#9e9e9e"),
)


def gpu_hours_figure(rows: list[dict], *, label: str, title: str) -> go.Figure:
    """Stacked bars: each row's GPU-hours as busy, allocated but idle, and unallocated."""
    figure = go.Figure()
    names = [row[label] for row in rows]
    for part, name, colour in GPU_HOURS_PARTS:
        figure.add_trace(
            go.Bar(x=names, y=[getattr(row["split"], part) for row in rows], name=name, marker_color=colour)
        )
    figure.update_layout(barmode="stack")
    _layout(figure, title=title, y_title="GPU-hours")
    figure.update_layout(hovermode="x")
    return figure


def sensor_lines(series: list[Series], *, title: str, y_title: str) -> go.Figure:
    """A node's BMC sensors over time, one line a sensor."""
    figure = go.Figure()
    for one in series:
        figure.add_trace(go.Scatter(x=_times(one), y=one.values(), mode="lines", name=one.labels.get("sensor", "")))
    return _layout(figure, title=title, y_title=y_title)


def power_against_budget(power: Series, *, share_w: float | None, rack: str) -> go.Figure:
    """The node's chassis power over time against its even share of its rack's power budget."""
    figure = go.Figure()
    figure.add_trace(go.Scatter(x=_times(power), y=power.values(), mode="lines", name="chassis power"))
    if share_w and power.points:
        times = _times(power)
        figure.add_trace(
            go.Scatter(
                x=[times[0], times[-1]],
                y=[share_w, share_w],
                mode="lines",
                line={"dash": "dash", "color": "#d23b3b"},
                name=f"its share of rack {rack}'s budget",
            )
        )
    return _layout(figure, title="Power (24 h)", y_title="W")
