"""Plotly figures as plain {data, layout} dicts in Plotly's schema, and how a page embeds them (json_script, drawn by
static/js/charts.js).

Apps build their figures as dicts, not through plotly.graph_objects: validating every trace through Plotly's objects
costs more than the data (~25 ms of CPU a telemetry page, ~50 ms of the 512-node topology map's 80). Each app's
tests wrap its figures in go.Figure, which refuses a property Plotly does not know, and check that it builds the same
figure."""

from __future__ import annotations

import json
from functools import cache

import plotly.graph_objects as go


@cache
def _template() -> dict:
    """Plotly's default template, as go.Figure would embed it (so the charts look as they would through Plotly)."""
    return json.loads(go.Figure().to_json())["layout"]["template"]


def figure_json(figure: dict | go.Figure) -> dict:
    """The figure as json_script embeds it: a dict gets Plotly's default template; a go.Figure is serialised."""
    if isinstance(figure, go.Figure):
        return json.loads(figure.to_json())
    return {"data": figure["data"], "layout": {**figure["layout"], "template": _template()}}
