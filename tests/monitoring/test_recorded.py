"""The telemetry pages' recorded series (telemetry_rules): promtool runs the rules on synthetic series and they give
what the raw queries give; the Prometheus client reads them over long windows when they cover the window's start,
and asks the raw series otherwise."""

import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from apps.monitoring.telemetry import (
    NONZERO_INTERVAL_S,
    RECORDED_E2E_P99,
    RECORDED_FLEET,
    RECORDED_NODE_BUSY,
    RECORDED_NONZERO,
    RECORDED_NONZERO_RAN,
    PrometheusTelemetry,
    Window,
    Worst,
    telemetry_rules,
)


def test_the_recorded_series_give_what_the_raw_queries_give(promtool, tmp_path):
    """Two GPUs at 80 % and 100 %; a service at 1,000 tokens/s whose p99 is 235 ms: the recorded fleet mean is 90,
    and an hour's mean of the recorded 5-minute rates (recorded every minute, and every 5 minutes) gives the raw rate
    and p99 over that hour; the p99 recorded each minute is that p99 too."""
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": telemetry_rules()}, sort_keys=False))
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
    coarse_p99 = recorded_p99.replace("rate5m{", "rate5m_every5m{")
    raw_p99 = (
        'histogram_quantile(0.99, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket{service="chat"}[1h])))'
    )
    checks = [
        (f"sum({RECORDED_FLEET[('util', 'avg')]})", 90),
        (f"round(sum({recorded_rate}))", 1000),
        ('round(sum(rate(vllm:generation_tokens_total{service="chat"}[1h])))', 1000),
        (f"round(1000 * {recorded_p99})", 235),
        (f"round(1000 * {raw_p99})", 235),
        (f"round(1000 * {coarse_p99})", 235),
        (f'round(1000 * sum(max_over_time({RECORDED_E2E_P99}{{service="chat"}}[1h])))', 235),
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


def test_the_p99_recorded_each_minute_keeps_a_bad_minute_that_a_days_24_minute_steps_read_lower(promtool, tmp_path):
    """100 requests a minute under 100 ms, and at minute 601 a hundred more that took 1 to 2.5 s: the p99 recorded
    each minute over the 5 minutes before it reads 2,410 ms while they are in its range, and the day's worst of them
    is that; the 24-minute step's p99 (the quantile of the recorded bucket rates' means over the step, the 24 h
    chart's point) reads 2,125 ms."""
    group = next(group for group in telemetry_rules() if group["interval"] == "60s")
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": [group]}, sort_keys=False))
    slow = "0+100x600 60200+100x899"  # the bucket of 1 to 2.5 s and +Inf: a hundred more at minute 601
    per_minute = {"0.05": "0+50x1500", "0.1": "0+100x1500", "1": "0+100x1500", "2.5": slow, "+Inf": slow}
    buckets = "rackpilot:vllm_e2e_request_latency_seconds_bucket:rate5m"
    step_p99 = (
        f'histogram_quantile(0.99, sum by (le) (avg_over_time({buckets}{{service="chat"}}[1439s])))'  # 24 minutes
    )
    tests = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {
                        "series": f'vllm:e2e_request_latency_seconds_bucket{{service="chat",le="{le}"}}',
                        "values": values,
                    }
                    for le, values in per_minute.items()
                ],
                "promql_expr_test": [
                    {
                        "expr": f'round(1000 * max_over_time({RECORDED_E2E_P99}{{service="chat"}}[86399s]))',
                        "eval_time": "1500m",
                        "exp_samples": [{"labels": '{service="chat"}', "value": 2410}],
                    },
                    {"expr": f"round(1000 * {step_p99})", "eval_time": "624m", "exp_samples": [{"value": 2125}]},
                ],
            }
        ],
    }
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))

    ran = promtool("test", "rules", "tests.yml")

    assert ran.returncode == 0, ran.stdout + ran.stderr


def test_the_fleets_5_minute_energy_tiles_add_up_to_the_energy(promtool, tmp_path):
    """Two GPUs at 10 W and 20 W (600 and 1,200 J a minute, counted in mJ) and a driver reload of the second at
    100 min (its counter back at 0): the 5-minute group's tiles of the hour to 150 min (12 of them: the range a second
    short of the hour, as the client asks) are 60 × 1,800 J, less the reload's minute of the second GPU (1,200 J), as
    increase() counts a reset. (promtool evaluates every group at the test's interval: 5 minutes here.)"""
    group = next(group for group in telemetry_rules() if group["interval"] == "300s")
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": [group]}, sort_keys=False))
    assert "SUCCESS" in promtool("check", "rules", "rules.yml").stdout
    reloaded = "0+1200000x100 0+1200000x80"
    tests = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "5m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {
                        "series": 'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{Hostname="gpu001",gpu="0"}',
                        "values": "0+600000x180",
                    },
                    {"series": 'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{Hostname="gpu001",gpu="1"}', "values": reloaded},
                ],
                "promql_expr_test": [
                    {
                        "expr": "round(sum_over_time(rackpilot:gpu_energy_joules:increase5m[59m59s]))",
                        "eval_time": "150m",
                        "exp_samples": [{"value": 108000 - 1200}],
                    }
                ],
            }
        ],
    }
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))

    ran = promtool("test", "rules", "tests.yml")

    assert ran.returncode == 0, ran.stdout + ran.stderr


def test_the_gpus_reporting_an_xid_or_an_ecc_error_are_recorded_at_every_scrape_beside_a_mark_that_it_ran(
    promtool, tmp_path
):
    """Three GPUs, one with an XID 79 from its second scrape: the nonzero rule records that one GPU, with its
    labels, from then on; the group records a constant beside, so that a reader can tell "none reporting" from "no
    rule ran"."""
    group = next(group for group in telemetry_rules() if group["interval"] == f"{NONZERO_INTERVAL_S}s")
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": [group]}, sort_keys=False))
    assert "SUCCESS" in promtool("check", "rules", "rules.yml").stdout
    gpus = [
        ('Hostname="gpu001",gpu="0"', "0x10"),
        ('Hostname="gpu001",gpu="1"', "0 79x9"),
        ('Hostname="gpu002",gpu="0"', "0x10"),
    ]
    xid, ecc = RECORDED_NONZERO["xid"], RECORDED_NONZERO["ecc_dbe"]
    tests = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "15s",
        "tests": [
            {
                "interval": "15s",
                "input_series": [
                    {"series": f"{metric}{{{labels}}}", "values": values if metric.endswith("XID_ERRORS") else "0x10"}
                    for labels, values in gpus
                    for metric in ("DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")
                ],
                "promql_expr_test": [
                    {"expr": xid, "eval_time": "0s", "exp_samples": []},
                    {
                        "expr": xid,
                        "eval_time": "1m",
                        "exp_samples": [{"labels": f'{xid}{{Hostname="gpu001",gpu="1"}}', "value": 79}],
                    },
                    {"expr": ecc, "eval_time": "1m", "exp_samples": []},
                    {
                        "expr": RECORDED_NONZERO_RAN,
                        "eval_time": "1m",
                        "exp_samples": [{"labels": RECORDED_NONZERO_RAN, "value": 1}],
                    },
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
    state = {"asked": [], "recorded_from": None, "not_recorded": ()}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            params = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            query, start = params["query"][0], float(params["start"][0])
            step = float(params["step"][0])
            state["asked"].append(query)
            first = state["recorded_from"] if "rackpilot:" in query else start
            if any(f"{name}{{" in query for name in state["not_recorded"]):
                first = None
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


@pytest.mark.parametrize("recorded_from", [0, 1_800_000_000 - 1800])
def test_an_hour_reads_the_recorded_fleet_series_too_where_they_cover_it(prometheus_recording, recorded_from):
    prometheus_recording["recorded_from"] = recorded_from
    source = PrometheusTelemetry(prometheus_recording["url"])

    source.fleet_series("util", "avg", hostnames=["gpu001"], window=Window.named("1h", end=1_800_000_000))

    raw = 'avg(DCGM_FI_DEV_GPU_UTIL{Hostname=~"gpu001"})'
    assert prometheus_recording["asked"] == (
        ["rackpilot:gpu_util:avg"] if recorded_from == 0 else ["rackpilot:gpu_util:avg", raw]
    )


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


@pytest.mark.parametrize(
    ("window", "recorded"),
    [
        ("30d", "rackpilot:vllm_e2e_request_latency_seconds_bucket:rate5m_every5m"),
        ("7d", "rackpilot:vllm_e2e_request_latency_seconds_bucket:rate5m_every5m"),
        ("24h", "rackpilot:vllm_e2e_request_latency_seconds_bucket:rate5m"),
    ],
)
def test_the_p99_of_steps_of_an_hour_or_more_reads_the_bucket_rates_recorded_every_5_minutes(
    prometheus_recording, window, recorded
):
    prometheus_recording["recorded_from"] = 0
    source = PrometheusTelemetry(prometheus_recording["url"])

    series = source.p99_latency_seconds(service="chat", window=Window.named(window, end=1_800_000_000))

    assert len(series.points) == 61
    assert (
        len(prometheus_recording["asked"]) == 1 and f'{recorded}{{service="chat"}}' in prometheus_recording["asked"][0]
    )


def test_without_the_5_minute_bucket_rates_the_p99_reads_the_1_minute_ones(prometheus_recording):
    prometheus_recording["recorded_from"] = 0
    prometheus_recording["not_recorded"] = ("rackpilot:vllm_e2e_request_latency_seconds_bucket:rate5m_every5m",)
    source = PrometheusTelemetry(prometheus_recording["url"])

    series = source.p99_latency_seconds(service="chat", window=Window.named("30d", end=1_800_000_000))

    assert len(series.points) == 61
    assert "bucket:rate5m_every5m{" in prometheus_recording["asked"][0]
    assert "bucket:rate5m{" in prometheus_recording["asked"][1] and len(prometheus_recording["asked"]) == 2


@pytest.fixture
def prometheus_instant():
    """A Prometheus stand-in answering instant queries: the recorded series' parts ("joules", "worst"; "first" only
    when `covered`), and 7,000,000 mJ for any query of the raw counters; range queries with 0.2 at each step. Keeps the
    queries it was asked."""
    state = {"asked": [], "covered": True, "worst": "2.5", "samples_begin": None, "lowest_read": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            address = urllib.parse.urlsplit(self.path)
            if address.path == "/metrics":  # its own metrics: when its samples begin, where the test says
                state["lowest_read"] += 1
                begins = state["samples_begin"]
                self.send_response(200 if begins is not None else 404)
                self.end_headers()
                self.wfile.write(f"prometheus_tsdb_lowest_timestamp_seconds {begins}\n".encode())
                return
            params = urllib.parse.parse_qs(address.query)
            query = params["query"][0]
            state["asked"].append(query)
            if address.path.endswith("query_range"):
                start, step = float(params["start"][0]), float(params["step"][0])
                kind, result = "matrix", [{"metric": {}, "values": [[start + k * step, "0.2"] for k in range(61)]}]
            elif "rackpilot:" in query:
                # Recorded from where its samples begin: a look at the first part of a window that ends before then
                # (its offset from the query's time) finds nothing.
                offset = re.search(r"offset (\d+)s", query)
                looked_to = float(params["time"][0]) - (int(offset[1]) if offset else 0)
                first = state["covered"] and (state["samples_begin"] is None or looked_to > state["samples_begin"])
                parts = {"joules": "5000", "worst": state["worst"], **({"first": "12"} if first else {})}
                if query.startswith("count(count_over_time("):  # a count of the first tile alone
                    parts = {"first": "12"} if first else {}
                kind, result = (
                    "vector",
                    [{"metric": {"part": part}, "value": [0, value]} for part, value in parts.items()],
                )
            else:
                kind, result = "vector", [{"metric": {}, "value": [0, "7000000"]}]
            body = json.dumps({"status": "success", "data": {"resultType": kind, "result": result}}).encode()
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


@pytest.mark.parametrize(("covered", "joules"), [(True, 5000.0), (False, 7000.0)])
def test_the_fleets_energy_over_a_long_window_reads_the_recorded_tiles_when_they_cover_it(
    prometheus_instant, covered, joules
):
    prometheus_instant["covered"] = covered
    source = PrometheusTelemetry(prometheus_instant["url"])

    assert source.fleet_energy_joules(hostnames=["gpu001"], start=WEEK.start, end=WEEK.end) == joules
    assert "rackpilot:gpu_energy_joules:increase5m[604799s]" in prometheus_instant["asked"][0]
    assert len(prometheus_instant["asked"]) == (1 if covered else 2)


@pytest.mark.parametrize(
    ("covered", "worst", "expected"),
    [(True, "2.5", Worst(2.5, 60)), (True, "NaN", Worst(None, 60)), (False, "2.5", Worst(0.2, WEEK.step))],
)
def test_the_worst_p99_is_the_worst_recorded_minutes_where_the_rule_ran_through_the_windows_first_hour(
    prometheus_instant, covered, worst, expected
):
    prometheus_instant["covered"], prometheus_instant["worst"] = covered, worst
    source = PrometheusTelemetry(prometheus_instant["url"])

    assert source.worst_p99_latency_seconds(service="chat", window=WEEK) == expected
    asked = prometheus_instant["asked"][0]
    assert f'max_over_time({RECORDED_E2E_P99}{{service="chat"}}[604799s])' in asked
    assert f"count_over_time({RECORDED_E2E_P99}[1h] offset 601200s)" in asked  # any service's: the rule ran then
    assert len(prometheus_instant["asked"]) == (1 if covered else 2)  # else the chart's steps, the worst of them


@pytest.mark.parametrize(("covered", "joules"), [(True, 5000.0), (False, 7000.0)])
def test_the_fleets_energy_over_an_hour_reads_the_tiles_where_they_cover_it(prometheus_instant, covered, joules):
    prometheus_instant["covered"] = covered
    source = PrometheusTelemetry(prometheus_instant["url"])

    assert source.fleet_energy_joules(hostnames=["gpu001"], start=0, end=3600) == joules
    assert "sum_over_time(rackpilot:gpu_energy_joules:increase5m[3599s])" in prometheus_instant["asked"][0]
    # the window's first tile, (0, 300], tells whether the rule ran from its start
    assert (
        "count_over_time(rackpilot:gpu_energy_joules:increase5m[300s] offset 3300s)" in prometheus_instant["asked"][0]
    )
    assert ["rackpilot:" in query for query in prometheus_instant["asked"]] == [True, False][: 1 if covered else 2]
    # When its samples begin (Prometheus's /metrics) is read only where the record does not cover the window.
    assert prometheus_instant["lowest_read"] == (0 if covered else 1)


@pytest.mark.parametrize(("held", "asked"), [(1800, "[300s] offset 1500s"), (200, None)])
def test_a_prometheus_younger_than_the_window_is_covered_by_tiles_from_its_first_samples(
    prometheus_instant, held, asked
):
    """A week's window over a Prometheus that holds its last half hour: the tiles are read where the first 5 minutes
    of that half hour has one (its raw samples hold no more of the week); holding less than a tile, the counters."""
    prometheus_instant["samples_begin"] = WEEK.end - held
    source = PrometheusTelemetry(prometheus_instant["url"])

    joules = source.fleet_energy_joules(hostnames=["gpu001"], start=WEEK.start, end=WEEK.end)

    # The week's first tile first (not recorded: Prometheus holds no more than its last part), then what it holds.
    assert "[300s] offset 604500s" in prometheus_instant["asked"][0]
    if asked:
        assert joules == 5000.0
        assert f"count_over_time(rackpilot:gpu_energy_joules:increase5m{asked})" in prometheus_instant["asked"][1]
    else:
        assert joules == 7000.0
        assert ["rackpilot:" in query for query in prometheus_instant["asked"]] == [True, False]


@pytest.mark.parametrize("covered", [True, False])
def test_a_days_busy_gpu_seconds_read_the_nodes_tiles_asked_beside_whether_they_cover_it(prometheus_instant, covered):
    prometheus_instant["covered"] = covered
    source = PrometheusTelemetry(prometheus_instant["url"])

    source.node_busy_seconds(hostnames=["gpu001"], start=WEEK.end - 86_400, end=WEEK.end)

    asked = prometheus_instant["asked"]
    tiles = f"sum by (Hostname) (sum_over_time({RECORDED_NODE_BUSY}[86399s]))"
    assert tiles in asked and f"count(count_over_time({RECORDED_NODE_BUSY}[300s] offset 86100s))" in asked
    # Not covered: every GPU's SM active samples are read instead.
    assert any("DCGM_FI_PROF_SM_ACTIVE" in query for query in asked) is not covered


def test_the_fleets_energy_under_an_hour_reads_the_counters(prometheus_instant):
    source = PrometheusTelemetry(prometheus_instant["url"])

    assert source.fleet_energy_joules(hostnames=["gpu001"], start=0, end=1800) == 7000.0
    assert ["rackpilot:" in query for query in prometheus_instant["asked"]] == [False]


def test_the_nodes_5_minute_busy_tiles_add_up_to_their_busy_gpu_seconds(promtool, tmp_path):
    """gpu001's two GPUs half and fully SM-active, gpu002's one a quarter: the 5-minute group's busy tiles of the hour
    to 150 min add up per node to 5,400 and 900 GPU-seconds, what the client's raw query gives for the hour."""
    group = next(group for group in telemetry_rules() if group["interval"] == "300s")
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": [group]}, sort_keys=False))
    series = [("gpu001", "0", "0.5"), ("gpu001", "1", "1"), ("gpu002", "0", "0.25")]
    tests = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "5m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": f'DCGM_FI_PROF_SM_ACTIVE{{Hostname="{host}",gpu="{gpu}"}}', "values": f"{value}x180"}
                    for host, gpu, value in series
                ],
                "promql_expr_test": [
                    {
                        "expr": f"round(sum by (Hostname) (sum_over_time({RECORDED_NODE_BUSY}[59m59s])))",
                        "eval_time": "150m",
                        "exp_samples": [
                            {"labels": '{Hostname="gpu001"}', "value": 5400},
                            {"labels": '{Hostname="gpu002"}', "value": 900},
                        ],
                    }
                ],
            }
        ],
    }
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))

    ran = promtool("test", "rules", "tests.yml")

    assert ran.returncode == 0, ran.stdout + ran.stderr


@pytest.mark.parametrize(
    ("samples_begin", "first_hour"),
    [(None, '{slo=~"chat"}[1h] offset 2588400s))'), (WEEK.end - 600, '{slo=~"chat"}[1h]))')],
)
def test_recorded_slo_verdicts_cover_a_window_from_where_prometheus_holds_samples(
    prometheus_instant, samples_begin, first_hour
):
    prometheus_instant["samples_begin"] = samples_begin
    source = PrometheusTelemetry(prometheus_instant["url"])

    counted = source.recorded_slo_counts(slos=["chat"], span=30 * 86_400, end=WEEK.end)

    # The first hour looked at: the month's, then (a Prometheus holding 10 minutes) the hour before the end.
    asked = prometheus_instant["asked"]
    assert 'count_over_time(rackpilot:slo_good{slo=~"chat"}[1h] offset 2588400s))' in asked[0]
    assert f"count_over_time(rackpilot:slo_good{first_hour}" in asked[-1] and len(asked) == (2 if samples_begin else 1)
    assert set(counted) <= {"chat"}
