"""The Prometheus client of the telemetry interface: real API answers parse, refused URLs name the setting, a
Prometheus that is down is a message, and the targets file follows the inventory."""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from apps.inventory.demo import ClusterShape, load_cluster
from apps.monitoring.slo import counter_increase
from apps.monitoring.targets import write_targets
from apps.monitoring.telemetry import (
    PrometheusTelemetry,
    TelemetryError,
    Window,
    check_prometheus_url,
    histogram_quantile,
)
from apps.workloads.models import InferenceService

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "telemetry" / "prometheus-api"


@pytest.fixture
def prometheus_answering():
    """prometheus_answering(file, status) -> the URL of a server answering every request with that fixture."""
    servers = []

    def serve(name: str, status: int = 200) -> str:
        body = (FIXTURES / name).read_bytes()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield serve
    for server in servers:
        server.shutdown()


def test_a_range_answer_from_the_docs_reads_as_series(prometheus_answering):
    url = prometheus_answering("api-v1-query_range-matrix-up-two-series-step15s-prometheus-docs.json")
    series = PrometheusTelemetry(url).query_range("up", Window(end=1435781460, span=30, step=15, rate_range=15))
    assert [one.labels["job"] for one in series] == ["prometheus", "node"]
    assert series[0].points[0] == (1435781430.781, 1.0)


def test_an_instant_answer_from_the_docs_reads(prometheus_answering):
    url = prometheus_answering("api-v1-query-instant-vector-up-two-series-prometheus-docs.json")
    result = PrometheusTelemetry(url).query("up", at=1435781451.781)
    assert [item["value"][1] for item in result] == ["1", "0"]


def test_a_refused_query_says_why(prometheus_answering):
    url = prometheus_answering("api-v1-error-execution-too-many-samples-pingcap-diag-issue347.json", status=422)
    with pytest.raises(TelemetryError, match="too many samples"):
        PrometheusTelemetry(url).query("up", at=0)


def test_a_prometheus_that_is_down_is_a_message_naming_it():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(TelemetryError, match=f"could not reach Prometheus at http://127.0.0.1:{port}"):
        PrometheusTelemetry(f"http://127.0.0.1:{port}", timeout=1).query("up", at=0)


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "gopher://x",
        "http://169.254.169.254/latest/",
        "http://[fe80::1]:9090",
        "nonsense",
        # The metadata address in the IPv6 spellings a NAT64 gateway or a dual stack connects to, and by name: the
        # outbound guard's (apps/core/outbound.py), which every outbound call shares.
        "http://[::ffff:169.254.169.254]:9090",
        "http://[64:ff9b::a9fe:a9fe]:9090",
        "http://metadata.google.internal/",
    ],
)
def test_urls_that_may_not_be_called_are_refused_naming_the_setting(url):
    with pytest.raises(TelemetryError, match="RACKPILOT_PROMETHEUS"):
        check_prometheus_url(url)


def test_a_link_local_prometheus_may_be_allowed():
    assert check_prometheus_url("http://169.254.10.1:9090/", allow_link_local=True) == "http://169.254.10.1:9090"


def test_histogram_quantile_interpolates_as_prometheus_does():
    # 100 requests: 50 at most 0.1 s, 90 at most 0.2 s, all at most 0.4 s.
    buckets = [(0.1, 50.0), (0.2, 90.0), (0.4, 100.0), (float("inf"), 100.0)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.1)
    assert histogram_quantile(0.99, buckets) == pytest.approx(0.2 + 0.2 * 9 / 10)


def test_a_counter_reset_counts_from_zero():
    assert counter_increase([(0, 100.0), (1, 150.0), (2, 20.0), (3, 50.0)]) == 50 + 20 + 30


@pytest.mark.django_db
def test_targets_list_the_gpu_nodes_and_services_and_are_replaced_whole(tmp_path):
    load_cluster(ClusterShape(compute_nodes=3, nodes_per_rack=3, management_nodes=1))
    service = InferenceService.objects.create(name="chat", model="m", design_tokens_per_second=10)
    written = write_targets(directory=str(tmp_path), exporters="127.0.0.1:9400")
    assert sorted(path.name for path in written) == ["dcgm.json", "node.json", "vllm.json"]
    nodes = json.loads((tmp_path / "dcgm.json").read_text())
    assert [group["labels"]["instance"] for group in nodes] == ["gpu001", "gpu002", "gpu003"]  # not the mgmt node
    assert nodes[0] == {
        "targets": ["127.0.0.1:9400"],
        "labels": {"node": "gpu001", "rack": "r01", "instance": "gpu001", "__metrics_path__": "/nodes/gpu001/metrics"},
    }
    assert json.loads((tmp_path / "node.json").read_text())[0]["labels"]["__metrics_path__"] == (
        "/nodes/gpu001/node-metrics"
    )
    assert json.loads((tmp_path / "vllm.json").read_text())[0]["labels"]["service"] == "chat"
    assert write_targets(directory=str(tmp_path), exporters="127.0.0.1:9400") == []  # unchanged: not rewritten
    service.delete()
    assert write_targets(directory=str(tmp_path), exporters="127.0.0.1:9400") == [tmp_path / "vllm.json"]
    assert len(list(tmp_path.iterdir())) == 3  # nothing left aside


@pytest.mark.django_db
def test_real_nodes_are_scraped_at_their_management_ip(tmp_path):
    load_cluster(ClusterShape(compute_nodes=1, nodes_per_rack=1, management_nodes=0))
    InferenceService.objects.create(
        name="chat", model="m", design_tokens_per_second=10, endpoint="https://llm.example:8443/v1"
    )
    write_targets(directory=str(tmp_path), exporters="")
    node = json.loads((tmp_path / "dcgm.json").read_text())[0]
    assert node["targets"][0].endswith(":9400") and "__metrics_path__" not in node["labels"]
    assert json.loads((tmp_path / "node.json").read_text())[0]["targets"][0].endswith(":9100")
    service = json.loads((tmp_path / "vllm.json").read_text())[0]
    assert service["targets"] == ["llm.example:8443"] and service["labels"]["__scheme__"] == "https"


@pytest.fixture
def prometheus_counting():
    """A server answering /api/v1/query with the docs' vector for `up`, and an empty vector for anything else;
    `asked` counts the requests it had."""
    body = (FIXTURES / "api-v1-query-instant-vector-up-two-series-prometheus-docs.json").read_bytes()
    empty = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
    state = {"asked": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            state["asked"] += 1
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body if "query=up&" in self.path else empty)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    state["url"] = f"http://127.0.0.1:{server.server_address[1]}"
    yield state
    server.shutdown()


def test_every_query_is_asked_of_prometheus(prometheus_counting):
    source = PrometheusTelemetry(prometheus_counting["url"])
    for _ in range(3):
        source.query("up", at=1435781451.781)
    assert prometheus_counting["asked"] == 3
