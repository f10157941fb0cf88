"""One scenario recorded by both wirings: the embedded wiring's record (apps.monitoring.recorder's RecordedSample rows,
every minute) against what a real Prometheus computes for the same recording rules (`telemetry_rules()`) at the same
minutes, from the exporters' pages of the same simulated cluster. The raw series are written into Prometheus' TSDB
with promtool (OpenMetrics, a sample every 15 s, as a scrape would leave them) for a fixed hour, so the test sets its
clock and waits on nothing; the two agree within what Prometheus' sampling adds (its rate() extrapolates from the
samples inside the range, its gauges are the exporters' rounded figures)."""

import json
import math
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.conf import settings
from prometheus_client.parser import text_string_to_metric_families

from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node
from apps.monitoring import recorder
from apps.monitoring.models import RecordedSample
from apps.monitoring.telemetry import (
    RECORDED_E2E_P99,
    PrometheusTelemetry,
    SimulatorTelemetry,
    Window,
    current_workloads,
    telemetry_rules,
)
from apps.simulator import services as simulator
from apps.simulator.exporters import dcgm_exposition, vllm_exposition
from apps.simulator.models import SimFault
from apps.workloads.models import InferenceService, TrainingJob
from apps.workloads.services import set_training_nodes
from tests.live_server import need
from tests.monitoring.conftest import PROMETHEUS, free_port, wait_ready

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
END = 1_780_000_200  # the clock: a minute's end (2026-05-28 20:30 UTC)
HOUR = 3600
SCRAPE_S = 15


@pytest.fixture
def scenario(db):
    """Four nodes from two hours before END: a service on two, a training job on two; gpu002 power-capped for the
    last half hour."""
    load_cluster(ClusterShape(compute_nodes=4, nodes_per_rack=4, management_nodes=0))
    nodes = {node.hostname: node for node in Node.objects.all()}
    service = InferenceService.objects.create(name="chat", model="m", design_tokens_per_second=6000)
    service.nodes.set([nodes["gpu001"], nodes["gpu002"]])
    job = TrainingJob.objects.create(name="pretrain", state="running")
    set_training_nodes(job=job, nodes=[nodes["gpu003"], nodes["gpu004"]])
    began = datetime.fromtimestamp(END - 2 * HOUR, UTC)
    Node.objects.update(created=began)
    InferenceService.objects.update(created=began)
    TrainingJob.objects.update(created=began, started_at=began)
    simulator.inject_fault(node=nodes["gpu002"], kind="power_cap", target="", parameters={"watts": 300})
    SimFault.objects.update(created=datetime.fromtimestamp(END - HOUR / 2, UTC))


def _exporters_openmetrics(start: int, end: int) -> str:
    """Every series the simulated exporters expose, a sample every SCRAPE_S from start to end, as OpenMetrics with
    timestamps (each series' samples together, in time order, as promtool reads them)."""
    model = simulator.telemetry_model(workloads=current_workloads(), seed=settings.RACKPILOT_SIM_SEED)
    samples: dict[str, list[str]] = defaultdict(list)  # metric name -> its sample lines
    for t in range(start, end + 1, SCRAPE_S):
        # Each page with the labels its scrape target adds (apps/monitoring/targets.py): a service's name.
        pages = [(dcgm_exposition(model, hostname, t), {}) for hostname in sorted(model.histories)]
        pages += [(vllm_exposition(model, run.name, t), {"service": run.name}) for run in model.workloads.serving]
        for page, target in pages:
            for family in text_string_to_metric_families(page):
                for sample in family.samples:
                    if not math.isfinite(sample.value):
                        continue
                    pairs = sorted({**sample.labels, **target}.items())
                    labels = ",".join(f'{name}="{value}"' for name, value in pairs)
                    samples[sample.name].append((labels, t, sample.value))
    lines = []
    for name in sorted(samples):
        ordered = sorted(samples[name], key=lambda item: (item[0], item[1]))
        lines += [f"{name}{{{labels}}} {value!r} {t}" for labels, t, value in ordered]
    return "\n".join(lines) + "\n# EOF\n"


@pytest.fixture
def prometheus(scenario, tmp_path):
    """The URL of a Prometheus over a TSDB holding the exporters' series of the hour before END (and the rate range
    before it)."""
    need(
        Path(PROMETHEUS).exists() and Path(PROMTOOL).exists(),
        "prometheus is not installed (apt-get install prometheus)",
    )
    source = tmp_path / "exporters.om"
    source.write_text(_exporters_openmetrics(END - HOUR - 600, END))
    tsdb = tmp_path / "tsdb"
    subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(source), str(tsdb)], check=True)
    config = tmp_path / "prometheus.yml"
    config.write_text("global: {scrape_interval: 15s}\nscrape_configs: []\n")
    port = free_port()
    process = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={tsdb}",
            "--storage.tsdb.retention.time=100y",  # END's hour is in the past: kept, not pruned at start
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def _evaluated(url: str, expr: str, start: int, end: int) -> dict[str, dict[int, float]]:
    """The rule's expression as Prometheus evaluates it at each minute of [start, end] (a recording rule's value at
    its evaluation time), by labels as the record keeps them ('name=value,...', sorted)."""
    query = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": 60})
    with urllib.request.urlopen(f"{url}/api/v1/query_range?{query}", timeout=30) as answer:
        result = json.load(answer)["data"]["result"]
    return {_same_le(one["metric"]): {int(t): float(value) for t, value in one["values"]} for one in result}


def _same_le(labels: dict) -> str:
    """The labels as the record keeps them; a bucket's bound as the record spells it (vLLM's client writes le="1.0",
    the record "1": the same bucket)."""
    if "le" in labels:
        labels = {**labels, "le": recorder.le_label(float(labels["le"]))}
    return recorder.labels_key(**labels)


def _recorded(series: str) -> dict[str, dict[int, float]]:
    by_labels: dict[str, dict[int, float]] = defaultdict(dict)
    for labels, t, value in RecordedSample.objects.filter(series=series).values_list("labels", "time", "value"):
        by_labels[labels][t] = value
    return by_labels


def test_the_embedded_record_and_prometheus_rules_agree_on_the_same_minutes(prometheus):
    recorder.record_telemetry(until=END)  # the embedded wiring's minute runs over the last hour
    start = END - HOUR + 60
    minute_rules = telemetry_rules()[0]["rules"]
    compared = 0
    for rule in minute_rules:
        evaluated = _evaluated(prometheus, rule["expr"], start, END)
        recorded = _recorded(rule["record"])
        assert evaluated, rule["record"]
        for labels, values in evaluated.items():
            values = {t: value for t, value in values.items() if not math.isnan(value)}  # no requests: no p99 kept
            if set(values.values()) == {0.0} and labels not in recorded:
                continue  # a bucket no request fell in: the record leaves out what is zero throughout
            mine = recorded[labels]
            assert set(values) <= set(mine), (rule["record"], labels)
            for t, value in values.items():
                # Gauges: the exporters print rounded figures; rates: Prometheus extrapolates from 20 samples (which
                # a quantile of the rates, each bucket's alike, all but cancels).
                close = (
                    pytest.approx(value, rel=0.01)
                    if rule["record"] == RECORDED_E2E_P99
                    else pytest.approx(value, rel=0.03, abs=0.05)
                )
                assert mine[t] == close, (rule["record"], labels, t)
                compared += 1
    assert compared > 60 * len(minute_rules)
    assert RECORDED_E2E_P99 in {rule["record"] for rule in minute_rules}  # each service's p99 a minute, compared too
    # The cap shows in both from the minute it began, and the minutes before it stay as they were.
    power = _evaluated(prometheus, "sum(DCGM_FI_DEV_POWER_USAGE)", END - HOUR + 60, END)[""]
    assert power[END] < power[END - HOUR // 2 - 60]
    # The hour's worst p99 is the record's worst minute. This Prometheus holds no rule's series: asked its own query
    # (a real server parses it), it takes the worst of the day's 24-minute steps instead, and says so.
    hour, day = Window.named("1h", end=END), Window.named("24h", end=END)
    worst = max(_recorded(RECORDED_E2E_P99)["service=chat"].values())
    assert SimulatorTelemetry().worst_p99_latency_seconds(service="chat", window=hour) == (worst, 60)
    steps = PrometheusTelemetry(prometheus).worst_p99_latency_seconds(service="chat", window=day)
    assert steps.every == 1440 and steps.value > 0
