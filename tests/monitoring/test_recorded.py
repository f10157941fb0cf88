"""The telemetry pages' recorded series (telemetry_rules): promtool runs the rules on synthetic series and they give
what the raw queries give; the Prometheus client reads them over long windows when they cover the window's start,
and asks the raw series otherwise."""

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from apps.monitoring.telemetry import RECORDED_FLEET, PrometheusTelemetry, Window, telemetry_rules


def test_the_recorded_series_give_what_the_raw_queries_give(promtool, tmp_path):
    """Two GPUs at 80 % and 100 %; a service at 1,000 tokens/s whose p99 is 235 ms: the recorded fleet mean is 90,
    and an hour's mean of the recorded 5-minute rates gives the raw rate and p99 over that hour."""
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": [telemetry_rules()]}, sort_keys=False))
    assert "SUCCESS" in promtool("check", "rules", "rules.yml").stdout
    per_minute = {0.05: 50, 0.1: 90, 0.25: 100, "+Inf": 100}
    series = [
        {"series": 'DCGM_FI_DEV_GPU_UTIL{Hostname="gpu001",gpu="0"}', "values": "80x180"},
        {"series": 'DCGM_FI_DEV_GPU_UTIL{Hostname="gpu001",gpu="1"}', "values": "100x180"},
        {"series": 'vllm:generation_tokens_total{service="chat"}', "values": "0+60000x180"},
    ]
    series += [
        {
            "series": f'vllm:e2e_request_latency_seconds_bucket{{service="chat",le="{le}"}}',
            "values": f"0+{count}x180",
        }
        for le, count in per_minute.items()
    ]
    recorded_rate = 'avg_over_time(rackpilot:vllm_generation_tokens:rate5m{service="chat"}[1h])'
    recorded_p99 = (
        "histogram_quantile(0.99, sum by (le) "
        '(avg_over_time(rackpilot:vllm_e2e_request_latency_seconds_bucket:rate5m{service="chat"}[1h])))'
    )
    raw_p99 = (
        'histogram_quantile(0.99, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket{service="chat"}[1h])))'
    )
    checks = [
        (f"sum({RECORDED_FLEET[('util', 'avg')]})", 90),
        (f"round(sum({recorded_rate}))", 1000),
        ('round(sum(rate(vllm:generation_tokens_total{service="chat"}[1h])))', 1000),
        (f"round(1000 * {recorded_p99})", 235),
        (f"round(1000 * {raw_p99})", 235),
    ]
    tests = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {"expr": expr, "eval_time": "150m", "exp_samples": [{"value": value}]} for expr, value in checks
                ],
            }
        ],
    }
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))

    ran = promtool("test", "rules", "tests.yml")

    assert ran.returncode == 0, ran.stdout + ran.stderr


@pytest.fixture
def prometheus_recording():
    """A Prometheus stand-in answering range queries: the recorded series from `recorded_from` (unix time; None:
    not recorded), any other series from the window's start. Keeps the queries it was asked."""
    state = {"asked": [], "recorded_from": None}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            params = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            query, start = params["query"][0], float(params["start"][0])
            step = float(params["step"][0])
            state["asked"].append(query)
            first = state["recorded_from"] if "rackpilot:" in query else start
            values = [] if first is None else [[start + k * step, "1"] for k in range(61) if start + k * step >= first]
            result = [{"metric": {}, "values": values}] if values else []
            body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    state["url"] = f"http://127.0.0.1:{server.server_address[1]}"
    yield state
    server.shutdown()


WEEK = Window.named("7d", end=1_800_000_000)


def test_a_long_window_reads_the_recorded_fleet_series_when_they_cover_it(prometheus_recording):
    prometheus_recording["recorded_from"] = WEEK.start - 3600
    source = PrometheusTelemetry(prometheus_recording["url"])

    series = source.fleet_series("util", "avg", hostnames=["gpu001"], window=WEEK)

    assert len(series[0].points) == 61
    assert prometheus_recording["asked"] == ["rackpilot:gpu_util:avg"]


@pytest.mark.parametrize("recorded_from", [None, WEEK.start + 86_400])
def test_recorded_series_that_start_late_or_not_at_all_leave_it_to_the_raw_series(prometheus_recording, recorded_from):
    prometheus_recording["recorded_from"] = recorded_from
    source = PrometheusTelemetry(prometheus_recording["url"])

    series = source.fleet_series("util", "avg", hostnames=["gpu001"], window=WEEK)

    assert len(series[0].points) == 61
    assert prometheus_recording["asked"][-1] == 'avg(DCGM_FI_DEV_GPU_UTIL{Hostname=~"gpu001"})'


def test_short_windows_read_the_raw_series(prometheus_recording):
    prometheus_recording["recorded_from"] = 0
    source = PrometheusTelemetry(prometheus_recording["url"])

    source.fleet_series("util", "avg", hostnames=["gpu001"], window=Window.named("1h", end=1_800_000_000))

    assert prometheus_recording["asked"] == ['avg(DCGM_FI_DEV_GPU_UTIL{Hostname=~"gpu001"})']


def test_independent_questions_are_asked_at_once(prometheus_recording):
    source = PrometheusTelemetry(prometheus_recording["url"])
    window = Window.named("1h", end=1_800_000_000)
    questions = {
        field: (lambda field=field: source.gpu_series(field, hostnames=["gpu001"], window=window, aggregate="avg"))
        for field in ("util", "sm_active", "power")
    }

    answers = source.gather(questions)

    assert set(answers) == {"util", "sm_active", "power"}
    assert all(len(answer[0].points) == 61 for answer in answers.values())
