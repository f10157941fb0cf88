"""A training job's progress figures, built with Plotly and embedded by the template with json_script
(static/js/charts.js), as the monitoring pages' charts are."""

import json

import plotly.graph_objects as go

from apps.workloads.models import TrainingProgress

HEIGHT = 300


def _layout(figure: go.Figure, *, title: str, y_title: str) -> go.Figure:
    figure.update_layout(
        title={"text": title, "font": {"size": 14}},
        height=HEIGHT,
        margin={"l": 60, "r": 60, "t": 36, "b": 30},
        xaxis={"title": "Time (UTC)", "type": "date"},
        yaxis={"title": y_title},
        legend={"orientation": "h", "y": -0.2},
        hovermode="x unified",
    )
    return figure


def progress_figure(points: list[TrainingProgress]) -> go.Figure:
    """Loss against time, and the step on a second axis: a flat step line is a run that stopped (hung, crashed, or
    waiting for a restart); the steps a restart ran again are drawn where they ran last."""
    times = [point.time.isoformat() for point in points]
    figure = go.Figure()
    with_loss = [point for point in points if point.loss is not None]
    if with_loss:
        figure.add_trace(
            go.Scatter(
                x=[point.time.isoformat() for point in with_loss],
                y=[point.loss for point in with_loss],
                mode="lines",
                name="loss",
            )
        )
    figure.add_trace(
        go.Scatter(
            x=times, y=[point.step for point in points], mode="lines", name="step", yaxis="y2", line={"dash": "dot"}
        )
    )
    _layout(figure, title="Step and loss", y_title="Loss")
    # Steps are whole numbers: ticks at 0.5 steps (a short run) or "1.5k" read as a measurement, not a step count.
    steps = {"title": "Step", "overlaying": "y", "side": "right", "rangemode": "tozero", "tickformat": ",d"}
    if max((point.step for point in points), default=0) < 10:
        steps["dtick"] = 1
    figure.update_layout(yaxis2=steps)
    return figure


def throughput_figure(points: list[TrainingProgress]) -> go.Figure | None:
    """Samples/s, and the learning rate on a second axis; None when the log prints neither."""
    rated = [point for point in points if point.samples_per_second is not None]
    rates = [point for point in points if point.learning_rate is not None]
    if not rated and not rates:
        return None
    figure = go.Figure()
    if rated:
        figure.add_trace(
            go.Scatter(
                x=[point.time.isoformat() for point in rated],
                y=[point.samples_per_second for point in rated],
                mode="lines",
                name="samples/s",
            )
        )
    if rates:
        figure.add_trace(
            go.Scatter(
                x=[point.time.isoformat() for point in rates],
                y=[point.learning_rate for point in rates],
                mode="lines",
                name="learning rate",
                yaxis="y2",
                line={"dash": "dot"},
            )
        )
    _layout(figure, title="Throughput and learning rate", y_title="Samples/s")
    figure.update_layout(yaxis2={"title": "Learning rate", "overlaying": "y", "side": "right", "exponentformat": "e"})
    return figure


def progress_figures(points: list[TrainingProgress]) -> dict[str, dict]:
    """The page's figures by element id, as JSON-ready dicts; empty without points."""
    if not points:
        return {}
    figures = {"training-progress": progress_figure(points)}
    throughput = throughput_figure(points)
    if throughput is not None:
        figures["training-throughput"] = throughput
    return {key: json.loads(figure.to_json()) for key, figure in figures.items()}
