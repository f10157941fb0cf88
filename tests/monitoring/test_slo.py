"""The SLO criteria, budgets and burn rates; the generated Prometheus rules checked and run by a real promtool."""

import math

import pytest
import yaml

from apps.monitoring import slo
from apps.monitoring.slo import counter_increase
from apps.monitoring.telemetry import PrometheusTelemetry, histogram_quantile

CHAT = slo.SloSpec(
    name="chat-throughput",
    objective=slo.Objective.THROUGHPUT,
    target=90,
    compliance=0.99,
    service="chat",
    design_tokens_per_second=2000,
)
CHAT_P99 = slo.SloSpec(
    name="chat-p99", objective=slo.Objective.LATENCY_P99, target=100, compliance=0.99, service="chat"
)
ENERGY = slo.SloSpec(
    name="chat-energy",
    objective=slo.Objective.ENERGY_PER_MTOK,
    target=0.5,
    compliance=0.95,
    service="chat",
    hosts=("gpu001.dc1", "gpu002.dc1"),
)
UTIL = slo.SloSpec(
    name="r04-util", objective=slo.Objective.GPU_UTILISATION, target=85, compliance=0.9, hosts=("gpu017",)
)


def test_a_counter_increase_survives_a_reset():
    samples = [(0, 100.0), (15, 160.0), (30, 20.0), (45, 50.0)]  # restarted between 15 s and 30 s

    assert counter_increase(samples) == 60 + 20 + 30


def test_histogram_quantile_interpolates_inside_the_bucket_as_prometheus_does():
    buckets = [(0.05, 50.0), (0.1, 90.0), (0.25, 100.0), (math.inf, 100.0)]

    assert histogram_quantile(0.99, buckets) == pytest.approx(0.235)
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.05)
    assert slo.meets(CHAT_P99, histogram_quantile(0.99, [(0.1, 0.0), (math.inf, 0.0)])) is None  # no requests
    assert histogram_quantile(0.99, [(0.1, 10.0), (math.inf, 100.0)]) == 0.1  # in +Inf: the highest finite bound


def test_energy_per_million_tokens_splits_active_from_idle_amortised():
    # Two GPUs at 700 W for three 60 s steps; tokens flow in the first two steps only (1.2 M tokens).
    joules_per_step_mj = 700 * 60 * 1000
    gpu = [(t * 60, float(t * joules_per_step_mj)) for t in range(4)]
    tokens = [(0, 0.0), (60, 600_000.0), (120, 1_200_000.0), (180, 1_200_000.0)]

    energy = slo.energy_per_million_tokens([gpu, gpu], tokens)

    total_kwh = 2 * 3 * 700 * 60 / 3.6e6
    assert energy.kwh == pytest.approx(total_kwh)
    assert energy.amortised_kwh_per_mtok == pytest.approx(total_kwh / 1.2)
    assert energy.active_kwh_per_mtok == pytest.approx(total_kwh * 2 / 3 / 1.2)
    assert slo.energy_per_million_tokens([gpu], [(0, 5.0), (60, 5.0)]).amortised_kwh_per_mtok is None


def test_budget_and_burn_rate():
    verdicts = [True] * 98 + [False] * 2 + [None] * 5  # 2 % bad against a 1 % budget

    window = slo.budget(CHAT, "30d", verdicts)

    assert (window.judged, window.good, window.no_data) == (100, 98, 5)
    assert window.compliance == pytest.approx(0.98) and window.burn_rate == pytest.approx(2.0)
    assert window.met is False
    # Bounded and explained: twice the budget spent is "exhausted, 2.0x over", never a budget of -100 %.
    assert window.budget_remaining == 0 and window.budget_spent == pytest.approx(2.0)
    assert window.budget_text == "exhausted, 2.0\u00d7 over"
    assert slo.budget(CHAT, "1h", [True] * 199 + [False]).budget_text == "50 % left"
    assert slo.budget(CHAT, "1h", [None, None]).compliance is None  # no traffic is not a pass


def test_multi_window_alerts_need_both_windows_burning():
    burning, recovered = [False] * 60, [True] * 5
    long_burn_short_fine = slo.burn_alerts(CHAT, {"1h": burning, "5m": recovered})
    both = slo.burn_alerts(CHAT, {"1h": burning, "5m": [False] * 5})

    assert long_burn_short_fine == []
    assert [(a["window"], a["severity"]) for a in both] == [("1h", "page")]


def test_criteria_compare_in_the_right_direction():
    assert slo.meets(CHAT, 95.0) and not slo.meets(CHAT, 80.0)
    assert slo.meets(CHAT_P99, 80.0) and not slo.meets(CHAT_P99, 120.0)
    assert slo.meets(CHAT_P99, None) is None


def test_host_names_are_escaped_for_the_regex_matcher():
    assert 'Hostname=~"gpu001\\\\.dc1|gpu002\\\\.dc1"' in slo.value_expression(ENERGY)


def _write_rules(tmp_path, specs):
    document = slo.rules(specs)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(document, sort_keys=False))
    return document


def test_the_generated_rules_pass_promtool_check(promtool, tmp_path):
    _write_rules(tmp_path, [CHAT, CHAT_P99, ENERGY, UTIL])

    checked = promtool("check", "rules", "rules.yml")

    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout


def _alerts(document, spec):
    return [
        {"exp_labels": {"alertname": rule["alert"], **rule["labels"]}, "exp_annotations": rule["annotations"]}
        for rule in document["groups"][1]["rules"]
        if rule["labels"]["slo"] == spec.name
    ]


def test_prometheus_and_the_python_judges_agree_on_a_slow_service(promtool, tmp_path):
    """1,000 tokens/s against 2,000 designed (50 %, target 90 %), and p99 at 235 ms (target 100 ms): every step
    misses, so every burn-rate alert fires in Prometheus; the Python judges see the same values."""
    document = _write_rules(tmp_path, [CHAT, CHAT_P99])
    per_minute = {0.05: 50, 0.1: 90, 0.25: 100, "+Inf": 100}
    series = [{"series": 'vllm:generation_tokens_total{service="chat"}', "values": "0+60000x180"}]
    series += [
        {
            "series": f'vllm:e2e_request_latency_seconds_bucket{{service="chat",le="{le}"}}',
            "values": f"0+{count}x180",
        }
        for le, count in per_minute.items()
    ]
    tests = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {
                        "expr": 'rackpilot:slo_good{slo="chat-throughput"}',
                        "eval_time": "30m",
                        "exp_samples": [
                            {"labels": 'rackpilot:slo_good{slo="chat-throughput",objective="throughput"}', "value": 0}
                        ],
                    },
                    {
                        "expr": f"round({slo.value_expression(CHAT)}, 0.001)",
                        "eval_time": "30m",
                        "exp_samples": [{"value": 50}],
                    },
                    {
                        "expr": f"round({slo.value_expression(CHAT_P99)}, 0.001)",
                        "eval_time": "30m",
                        "exp_samples": [{"value": 235}],
                    },
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "150m",
                        "alertname": "RackpilotSloBurnRate",
                        "exp_alerts": _alerts(document, CHAT) + _alerts(document, CHAT_P99),
                    }
                ],
            }
        ],
    }
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))

    ran = promtool("test", "rules", "tests.yml")

    assert ran.returncode == 0, ran.stdout + ran.stderr
    tokens = [(t * 60.0, t * 60000.0) for t in range(6)]
    assert 100 * counter_increase(tokens) / 300 / CHAT.design_tokens_per_second == pytest.approx(50)
    buckets = [(0.05, 250), (0.1, 450), (0.25, 500), (math.inf, 500)]
    assert 1000 * histogram_quantile(0.99, buckets) == pytest.approx(235)
    assert slo.meets(CHAT, 50.0) is False and slo.meets(CHAT_P99, 235.0) is False


def test_a_healthy_service_fires_nothing(promtool, tmp_path):
    _write_rules(tmp_path, [CHAT])
    tests = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": 'vllm:generation_tokens_total{service="chat"}', "values": "0+114000x180"}],
                "alert_rule_test": [{"eval_time": "150m", "alertname": "RackpilotSloBurnRate", "exp_alerts": []}],
            }
        ],
    }
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))

    ran = promtool("test", "rules", "tests.yml")

    assert ran.returncode == 0, ran.stdout + ran.stderr


class _Asked(PrometheusTelemetry):
    """Prometheus's client answering from a sample list, keeping what it asked (the question is run by promtool)."""

    def __init__(self, answer):
        super().__init__("http://127.0.0.1:9090")
        self.answer, self.asked = answer, []

    def query(self, promql, *, at):
        self.asked.append((promql, at))
        return self.answer


def test_the_recorded_verdicts_of_every_slo_are_counted_in_one_prometheus_query(promtool, tmp_path):
    """Two hours' window at 3 h: `fast` recorded throughout (met until minute 120; minute 60, where Prometheus 2.x
    and 3.x draw the first hour's edge differently, left out), `late` only from minute 150 (its window's first hour
    holds none of it, so it is not counted from the record); one query asks both."""
    answer = [
        {"metric": {"slo": slo_name, "part": part}, "value": [10800, str(value)]}
        for slo_name, part, value in (
            ("fast", "judged", 120),
            ("fast", "good", 60),
            ("fast", "first", 60),
            ("late", "judged", 31),
            ("late", "good", 31),
        )
    ]
    prometheus = _Asked(answer)

    counted = prometheus.recorded_slo_counts(slos=["fast", "late"], span=7200, end=10800)

    assert counted == {"fast": (120, 60)} and len(prometheus.asked) == 1
    ((promql, at),) = prometheus.asked
    tests = {
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": 'rackpilot:slo_good{slo="fast",objective="throughput"}', "values": "1x59 _ 1x59 0x59"},
                    {"series": 'rackpilot:slo_good{slo="late",objective="p99_latency"}', "values": "_x150 1x30"},
                    {"series": 'rackpilot:slo_good{slo="other",objective="throughput"}', "values": "1x180"},
                ],
                "promql_expr_test": [
                    {
                        "expr": promql,
                        "eval_time": f"{at // 60}m",
                        "exp_samples": [
                            {
                                "labels": f'{{slo="{item["metric"]["slo"]}",part="{item["metric"]["part"]}"}}',
                                "value": float(item["value"][1]),
                            }
                            for item in answer
                        ],
                    }
                ],
            }
        ],
    }
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))

    ran = promtool("test", "rules", "tests.yml")

    assert ran.returncode == 0, ran.stdout + ran.stderr
