"""The telemetry figures are built as plain dicts: Plotly accepts each one (its objects validate every property) and,
given it, builds the same figure that the page embeds."""

import json
from types import SimpleNamespace

import plotly.graph_objects as go
import pytest

from apps.monitoring import charts
from apps.monitoring.telemetry import Series, Window

T0 = 1_800_000_000


def _series(labels: dict, values: list[float]) -> Series:
    return Series(labels, [(T0 + 60 * k, value) for k, value in enumerate(values)])


GPU0, GPU1 = _series({"Hostname": "gpu001", "gpu": "0"}, [10, 0, 79]), _series({"gpu": "1"}, [30, 40, 50])
WINDOW = Window(end=T0 + 3600, span=3600, step=60, rate_range=60)
SPLIT = SimpleNamespace(busy=1.5, allocated_idle=2.0, unallocated=0.5)
FIGURES = {
    "gpu_lines": charts.gpu_lines([GPU1, GPU0], title="Power", y_title="W", scale=2.0, y_range=[0, 700]),
    "utilisation": charts.utilisation_figure([GPU0], [_series({}, [0.5, 0.25, 1.0])]),
    "xid": charts.xid_figure([GPU0, _series({"gpu": "2"}, [0, 0, 0])], window=WINDOW),
    "xid_quiet": charts.xid_figure([_series({"gpu": "2"}, [0, 0, 0])], window=WINDOW),
    "service": charts.service_figure(GPU1, _series({}, [0.1, 0.2]), design=60.0, target_ms=150, name="chat"),
    "service_empty": charts.service_figure(Series({}), Series({}), design=60.0, target_ms=150, name="chat"),
    "gpu_hours": charts.gpu_hours_figure([{"name": "r1", "split": SPLIT}], label="name", title="GPU-hours"),
    "sensors": charts.sensor_lines([_series({"sensor": "Inlet"}, [21.0, 22.5])], title="Temperatures", y_title="°C"),
    "power_budget": charts.power_against_budget(_series({}, [900, 950]), share_w=1000.0, rack="r1"),
}


@pytest.mark.parametrize("name", FIGURES)
def test_plotly_accepts_each_figure_and_builds_the_same_one(name):
    embedded = charts.figure_json(FIGURES[name])

    validated = json.loads(go.Figure(FIGURES[name]).to_json())  # raises on a property Plotly does not know

    assert embedded == validated
    assert json.loads(json.dumps(embedded)) == embedded  # plain JSON data, as json_script writes it


def test_the_figures_hold_what_the_series_say():
    lines = FIGURES["gpu_lines"]["data"]
    assert [trace["name"] for trace in lines] == ["GPU 0", "GPU 1"]  # by GPU index
    assert lines[0]["y"] == [20, 0, 158] and lines[0]["x"][0] == "2027-01-15T08:00:00+00:00"
    assert FIGURES["utilisation"]["data"][1]["y"] == [50, 25, 100]
    assert [len(trace["x"]) for trace in FIGURES["xid"]["data"]] == [2]  # zero readings and quiet GPUs are left out
    service = FIGURES["service"]["data"]
    assert [trace["name"] for trace in service] == ["tokens/s", "design tokens/s", "p99 ms", "p99 target"]
    assert service[2]["y"] == [100, 200] and service[3]["y"] == [150, 150]
    assert [trace["name"] for trace in FIGURES["service_empty"]["data"]] == ["tokens/s", "p99 ms"]
    assert [trace["y"] for trace in FIGURES["gpu_hours"]["data"]] == [[1.5], [2.0], [0.5]]


def test_a_plotly_figure_is_still_serialised():
    figure = go.Figure(go.Bar(x=["a"], y=[1]))

    assert charts.figure_json(figure)["data"][0]["type"] == "bar"


def test_clock_reasons_name_every_bit_seen_in_the_window_unknown_ones_included():
    series = [_series({"gpu": "0"}, [0x1, 0x4, 0x4]), _series({"gpu": "1"}, [0x0, 0x40 | 0x8, 0x1000])]

    assert charts.reasons_in(series) == [
        "gpu_idle",
        "sw_power_cap",
        "hw_slowdown",
        "hw_thermal_slowdown",
        "unknown_0x1000",
    ]


def test_the_xid_chart_names_codes_spans_the_window_and_says_when_there_are_none():
    xid, quiet = FIGURES["xid"]["layout"], FIGURES["xid_quiet"]["layout"]

    assert FIGURES["xid"]["data"][0]["y"] == ["10", "79"]  # codes, not a scale with 78.5 between them
    assert xid["yaxis"]["type"] == "category"
    assert xid["xaxis"]["range"] == ["2027-01-15T08:00:00+00:00", "2027-01-15T09:00:00+00:00"]  # the window's hour
    assert FIGURES["xid_quiet"]["data"] == [] and quiet["xaxis"]["range"] == xid["xaxis"]["range"]
    assert [note["text"] for note in quiet["annotations"]] == ["No XID errors in this window"]
    assert quiet["yaxis"]["visible"] is False


def test_the_gpu_hours_key_is_above_the_bars_not_on_their_names():
    assert FIGURES["gpu_hours"]["layout"]["legend"]["yanchor"] == "bottom"
    assert FIGURES["gpu_hours"]["layout"]["legend"]["y"] > 1
