"""Telemetry figures as plain {data, layout} dicts in Plotly's schema, embedded by the templates with json_script
(static/js/charts.js). Built as dicts, not plotly.graph_objects: validating every trace through Plotly's objects cost
more than the page's queries (~25 ms of CPU a cluster page); tests/monitoring/test_charts.py checks that Plotly
accepts each figure and builds the same one."""

from __future__ import annotations

import datetime as dt

from apps.core.charts import figure_json as figure_json  # re-exported: the views embed with it
from apps.monitoring.telemetry import Series, Window
from apps.parsers.nvidia_smi import decode_clocks_event_reasons

HEIGHT = 280


def _figure(data: list[dict], *, title: str, y_title: str, y_range=None, y_axis: dict | None = None, **layout) -> dict:
    return {
        "data": data,
        "layout": {
            "title": {"text": title, "font": {"size": 14}},
            "height": HEIGHT,
            "margin": {"l": 50, "r": 10, "t": 36, "b": 30},
            "yaxis": {"title": {"text": y_title}, **({"range": list(y_range)} if y_range else {}), **(y_axis or {})},
            "legend": {"orientation": "h", "y": -0.2},
            "hovermode": "x unified",
            **layout,
        },
    }


def _line(x: list, y: list, name: str, **extra) -> dict:
    return {"type": "scatter", "x": x, "y": y, "mode": "lines", "name": name, **extra}


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, tz=dt.UTC).isoformat()


def _times(series: Series) -> list[str]:
    return [_iso(t) for t, _ in series.points]


def _gpu_name(series: Series) -> str:
    return f"GPU {series.labels.get('gpu', '')}" if series.labels.get("gpu") else "all GPUs"


def gpu_lines(series: list[Series], *, title: str, y_title: str, scale: float = 1.0, y_range=None) -> dict:
    data = [
        _line(_times(one), [v * scale for v in one.values()], _gpu_name(one))
        for one in sorted(series, key=lambda s: int(s.labels.get("gpu") or 0))
    ]
    return _figure(data, title=title, y_title=y_title, y_range=y_range)


def utilisation_figure(util: list[Series], sm_active: list[Series]) -> dict:
    """GPU utilisation (the share of time a kernel ran) beside SM active (the share of SMs busy): a card can be
    100% 'utilised' with its SMs half idle, which only the second shows."""
    data = [_line(_times(one), one.values(), f"utilisation {_gpu_name(one)}") for one in util]
    data += [
        _line(_times(one), [100 * v for v in one.values()], f"SM active {_gpu_name(one)}", line={"dash": "dot"})
        for one in sm_active
    ]
    return _figure(data, title="Utilisation and SM active", y_title="%", y_range=[0, 105])


def reasons_in(series: list[Series]) -> list[str]:
    """The clocks-event reasons set at any point of the window, by name."""
    seen = 0
    for one in series:
        for value in one.values():
            seen |= int(value)
    return decode_clocks_event_reasons(seen)


def xid_figure(series: list[Series], *, window: Window) -> dict:
    """The XID codes seen in the window, a marker a GPU and step. Codes are names, not a scale (a category axis, no
    "78.5"); the time axis is the window's, as on the other charts, not the span the markers happen to cover; a quiet
    window says so in words instead of drawing bare axes."""
    data = []
    for one in series:
        points = [(t, v) for t, v in one.points if v]
        if points:
            data.append(
                {
                    "type": "scatter",
                    "x": _times(Series(one.labels, points)),
                    "y": [str(int(v)) for _, v in points],
                    "mode": "markers",
                    "name": f"{one.labels.get('Hostname', '')} {_gpu_name(one)}".strip(),
                }
            )
    span = [_iso(window.start), _iso(window.end)]
    if not data:
        return _figure(
            [],
            title="XID errors",
            y_title="",
            xaxis={"range": span, "type": "date"},
            y_axis={"visible": False},
            annotations=[_NOTE | {"text": "No XID errors in this window"}],
        )
    return _figure(
        data, title="XID errors", y_title="XID", xaxis={"range": span, "type": "date"}, y_axis={"type": "category"}
    )


# A sentence in the middle of an empty chart.
_NOTE = {"xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5, "showarrow": False, "font": {"size": 13}}


def _level(times: list[str], value: float, name: str, colour: str, **extra) -> dict:
    """A dashed horizontal line across the chart: a target or a design figure."""
    return _line([times[0], times[-1]], [value, value], name, line={"dash": "dash", "color": colour}, **extra)


def service_figure(tokens: Series, p99: Series, *, design: float, target_ms: float, name: str) -> dict:
    """Tokens/s against the design throughput, and p99 latency against its target on a second axis."""
    token_times, p99_times = _times(tokens), _times(p99)
    data = [_line(token_times, tokens.values(), "tokens/s")]
    if tokens.points:
        data.append(_level(token_times, design, "design tokens/s", "#8a93a6"))
    data.append(_line(p99_times, [1000 * v for v in p99.values()], "p99 ms", yaxis="y2"))
    if p99.points:
        data.append(_level(p99_times, target_ms, "p99 target", "#d23b3b", yaxis="y2"))
    second_axis = {"title": {"text": "p99 ms"}, "overlaying": "y", "side": "right", "rangemode": "tozero"}
    return _figure(data, title=f"{name}: tokens/s and p99 latency", y_title="tokens/s", yaxis2=second_axis)


GPU_HOURS_PARTS = (
    ("busy", "busy (SM active)", "#2e7d32"),
    ("allocated_idle", "allocated, idle", "#f9a825"),
    ("unallocated", "unallocated", "#9e9e9e"),
)


def gpu_hours_figure(rows: list[dict], *, label: str, title: str) -> dict:
    """Stacked bars: each row's GPU-hours as busy, allocated but idle, and unallocated."""
    names = [row[label] for row in rows]
    data = [
        {
            "type": "bar",
            "x": names,
            "y": [getattr(row["split"], part) for row in rows],
            "name": name,
            "marker": {"color": colour},
        }
        for part, name, colour in GPU_HOURS_PARTS
    ]
    # The key above the plot, right of the title: below it, it sat on the bars' slanted names ("gpu" for gpu001).
    key = {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom"}
    return _figure(data, title=title, y_title="GPU-hours", barmode="stack", hovermode="x", legend=key)


def sensor_lines(series: list[Series], *, title: str, y_title: str) -> dict:
    """A node's BMC sensors over time, one line a sensor."""
    data = [_line(_times(one), one.values(), one.labels.get("sensor", "")) for one in series]
    return _figure(data, title=title, y_title=y_title)


def power_against_budget(power: Series, *, share_w: float | None, rack: str) -> dict:
    """The node's chassis power over time against its even share of its rack's power budget."""
    times = _times(power)
    data = [_line(times, power.values(), "chassis power")]
    if share_w and power.points:
        data.append(_level(times, share_w, f"its share of rack {rack}'s budget", "#d23b3b"))
    return _figure(data, title="Power (24 h)", y_title="W")
