"""Telemetry through a real Prometheus scraping the simulated exporters, against the simulator asked directly: the
same window gives the same figures (within what scraping at 2 s intervals shifts). The window ends where Prometheus
has scraped enough behind it, read from its samples, not after a fixed sleep."""

import json
import math
import time
import urllib.request

import pytest

from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node
from apps.monitoring.exporters import exporter_server
from apps.monitoring.targets import write_targets
from apps.monitoring.telemetry import PrometheusTelemetry, SimulatorTelemetry, Window
from apps.workloads.models import InferenceService, TrainingJob
from apps.workloads.services import set_training_nodes
from tests.waits import HANG_S

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(transactional_db):
    load_cluster(ClusterShape(compute_nodes=4, nodes_per_rack=4, management_nodes=0))
    nodes = {node.hostname: node for node in Node.objects.all()}
    service = InferenceService.objects.create(
        name="chat", model="meta-llama/Llama-3.1-8B", design_tokens_per_second=6000
    )
    service.nodes.set([nodes["gpu001"], nodes["gpu002"]])
    job = TrainingJob.objects.create(name="pretrain", state="running")
    set_training_nodes(job=job, nodes=[nodes["gpu003"], nodes["gpu004"]])
    return service


@pytest.fixture
def scraped(cluster, tmp_path, start_prometheus):
    """(Prometheus URL, a window it has scraped whole)."""
    server = exporter_server(host="127.0.0.1", port=0, refresh=1.0)
    server.start()
    try:
        targets = tmp_path / "targets"
        write_targets(directory=str(targets), exporters=f"127.0.0.1:{server.port}")
        url = start_prometheus(targets)
        # The window (10 s), the rate range before it (20 s) and a scrape before that (2 s), with a second to spare
        # for the end's rounding down to a whole second. Prometheus stamps a sample when it starts the scrape and the
        # exporter reads the model when it answers: on a loaded machine half a second apart, 6 % of a rate over 8 s
        # (a loaded run's token rate read 1,924 against 1,815); over 20 s it stays inside the 5 % compared.
        end = _wait_for_scraped(url, seconds_behind=33, timeout=HANG_S)
        yield url, Window(end=end, span=10, step=2, rate_range=20)
    finally:
        server.stop()


SCRAPED = ("vllm:generation_tokens_total", "DCGM_FI_DEV_GPU_UTIL")  # one of each exporter's


def _covered(url: str, metric: str) -> tuple[float, float] | None:
    """(the latest first sample, the earliest last sample) of the metric's series: the span every one of them covers;
    None before the first scrape."""
    query = urllib.request.quote(f"{metric}[5m]")
    with urllib.request.urlopen(f"{url}/api/v1/query?query={query}", timeout=5) as answer:
        series = json.load(answer)["data"]["result"]
    if not series:
        return None
    return max(one["values"][0][0] for one in series), min(one["values"][-1][0] for one in series)


def _wait_for_scraped(url: str, *, seconds_behind: float, timeout: float) -> float:
    """A whole second with `seconds_behind` of samples of every series of both exporters before it, as soon as
    Prometheus has them (a loaded machine's late or missed scrapes only make this wait longer)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        spans = [_covered(url, metric) for metric in SCRAPED]
        if None not in spans:
            first, last = max(span[0] for span in spans), min(span[1] for span in spans)
            if last - first >= seconds_behind:
                return float(int(last))
        time.sleep(0.5)
    raise AssertionError(f"Prometheus at {url} did not scrape {seconds_behind} s of {SCRAPED} in {timeout} s")


def close(a: list[float], b: list[float], rel: float) -> bool:
    return len(a) == len(b) and all(abs(x - y) <= rel * max(abs(x), abs(y), 1e-9) for x, y in zip(a, b, strict=True))


def test_prometheus_and_the_simulator_give_the_same_answers(scraped, cluster):
    url, window = scraped
    prometheus, direct = PrometheusTelemetry(url, timeout=5), SimulatorTelemetry()
    hosts = ["gpu001", "gpu002", "gpu003", "gpu004"]

    for field, aggregate, rel in [("util", "avg", 0.02), ("power", "sum", 0.02), ("sm_active", "avg", 0.03)]:
        seen = prometheus.gpu_series(field, hostnames=hosts, window=window, aggregate=aggregate)[0].values()
        asked = direct.gpu_series(field, hostnames=hosts, window=window, aggregate=aggregate)[0].values()
        assert close(seen, asked, rel), (field, seen, asked)

    per_gpu = prometheus.gpu_series("util", hostnames=["gpu003"], window=window)
    assert sorted(int(series.labels["gpu"]) for series in per_gpu) == list(range(8))
    # Each GPU's means over the window (what the SLO blame ranks): averaged in Prometheus, a value a GPU.
    seen = prometheus.gpu_means(("util", "sm_clock"), hostnames=hosts, window=window)
    asked = direct.gpu_means(("util", "sm_clock"), hostnames=hosts, window=window)
    for name in ("util", "sm_clock"):
        assert len(asked[name]) == 32 and set(seen[name]) == set(asked[name]), name
        for key, value in asked[name].items():
            assert seen[name][key] == pytest.approx(value, rel=0.03, abs=1.0), (name, key)

    start = window.end - 15
    assert prometheus.energy_joules(hostnames=hosts, start=start, end=window.end) == pytest.approx(
        direct.energy_joules(hostnames=hosts, start=start, end=window.end), rel=0.05
    )
    seen = prometheus.tokens_per_second(service="chat", window=window).values()
    asked = direct.tokens_per_second(service="chat", window=window).values()
    assert asked and close(seen, asked, 0.05), (seen, asked)
    seen = prometheus.p99_latency_seconds(service="chat", window=window).values()
    asked = direct.p99_latency_seconds(service="chat", window=window).values()
    assert asked and close(seen, asked, 0.05), (seen, asked)
    seen = prometheus.energy_per_million_tokens_kwh(service=cluster, start=start, end=window.end)
    asked = direct.energy_per_million_tokens_kwh(service=cluster, start=start, end=window.end)
    assert seen == pytest.approx(asked, rel=0.08)


def test_gpu_hours_and_slo_counts_are_the_same_from_prometheus_and_the_simulator(scraped, cluster):
    from apps.monitoring import gpuhours, slo

    url, window = scraped
    prometheus, direct = PrometheusTelemetry(url, timeout=5), SimulatorTelemetry()
    hosts = ["gpu001", "gpu002", "gpu003", "gpu004"]

    seen = prometheus.sm_active_seconds(hostnames=hosts, start=window.start, end=window.end)
    asked = direct.sm_active_seconds(hostnames=hosts, start=window.start, end=window.end)
    assert set(seen) == set(asked) and len(seen) == 32
    for key, value in asked.items():
        assert seen[key] == pytest.approx(value, rel=0.03, abs=0.05), key

    from_prometheus = gpuhours.gpu_hours(window=window, source=prometheus)
    from_simulator = gpuhours.gpu_hours(window=window, source=direct)
    for part in ("busy", "allocated_idle", "unallocated"):
        assert getattr(from_prometheus.cluster, part) == pytest.approx(
            getattr(from_simulator.cluster, part), rel=0.03, abs=1e-4
        ), part
    assert from_prometheus.cluster.busy > 0 and from_prometheus.cluster.allocated_idle > 0
    # The serving nodes hold the most idle hours, whichever source says so.
    assert {row["node"].hostname for row in gpuhours.idle_holders(from_prometheus)[:2]} == {"gpu001", "gpu002"}
    assert {row["node"].hostname for row in gpuhours.idle_holders(from_simulator)[:2]} == {"gpu001", "gpu002"}

    # An SLO's steps counted by Prometheus (a subquery, nothing sent back but two counts) as judged in Python.
    end = window.end - window.end % 2
    # The steps of (end - 10 s, end]: five of 2 s.
    values = direct.gpu_series("util", hostnames=hosts, window=Window(end, 10, 2, 10), aggregate="avg")[0].values()
    # Targets on either side of what the nodes did (their load follows the demand of the hour): every step meets the
    # first, none the second, whenever the test runs.
    below, above = math.floor(min(values)) - 1, math.ceil(max(values)) + 1
    cases = [(below, True)] if below >= 0 else []
    cases += [(above, False)] if above <= 100 else []
    assert cases, values
    for target, all_met in cases:
        spec = slo.SloSpec(name="u", objective="gpu_utilisation", target=target, compliance=0.99, hosts=tuple(hosts))
        judged, good = prometheus.slo_counts(good_expression=slo.good_expression(spec), span=10, resolution=2, end=end)
        asked = values[-judged:]
        assert judged == 5 and good == (judged if all_met else 0)
        assert good == sum(bool(slo.meets(spec, value)) for value in asked)
        # Nothing recorded here (no rules loaded): the recorded path declines and the subquery above counts.
        assert prometheus.recorded_slo_counts(slos=[spec.name], span=10, end=end) == {}

    # Thirty days asked of a Prometheus holding a minute or two: the subquery keeps to the samples it holds, and
    # counts what a window over just those counts.
    begins = prometheus.samples_begin(end=end)
    assert 0 < end - begins < 3600
    asked, query = [], prometheus.query
    prometheus.query = lambda promql, *, at: asked.append(promql) or query(promql, at=at)
    expression = slo.good_expression(spec)
    month = prometheus.slo_counts(good_expression=expression, span=30 * 86_400, resolution=2, end=end)
    held = prometheus.slo_counts(good_expression=expression, span=int(end - begins) + 60, resolution=2, end=end)
    assert month == held and month[0] > 5
    assert f"[{int(end - begins) + 1}s:2s]" in asked[0]
