"""Prometheus holds Rackpilot's rules: the file written beside the targets, rewritten when an SLO changes, and a real
Prometheus started with the product's docker/prometheus.yml loading it and loading it again on the reload asked for."""

import json
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml

from apps.inventory.demo import ClusterShape, load_cluster
from apps.monitoring import rule_files
from apps.monitoring.models import Slo
from apps.workloads.models import InferenceService
from tests.live_server import need
from tests.waits import until

from .conftest import PROMETHEUS, free_port, wait_ready

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def chat(db):
    load_cluster(ClusterShape(compute_nodes=2, nodes_per_rack=2, management_nodes=0))
    return InferenceService.objects.create(name="chat", model="meta-llama/Llama-3.1-8B", design_tokens_per_second=600)


def test_the_rules_file_is_the_download_and_is_written_only_when_it_changes(chat, tmp_path, browser_as, viewer):
    Slo.objects.create(name="chat-util", objective="gpu_utilisation", scope="service", service=chat, target=85)

    written = rule_files.write_rules(directory=str(tmp_path))

    assert written == tmp_path / rule_files.RULES_FILE
    assert written.read_bytes() == browser_as(viewer).get("/telemetry/slos/rules.yml").content
    assert rule_files.write_rules(directory=str(tmp_path)) is None  # the same text: not rewritten


def test_a_change_to_an_slo_rewrites_the_rules_once_it_commits(
    chat, tmp_path, settings, django_capture_on_commit_callbacks
):
    settings.RACKPILOT_PROMETHEUS_TARGETS_DIR = str(tmp_path)
    settings.RACKPILOT_PROMETHEUS_URL = ""  # no Prometheus to reload: the file is still written

    with django_capture_on_commit_callbacks(execute=True):
        slo = Slo.objects.create(
            name="chat-util", objective="gpu_utilisation", scope="service", service=chat, target=85
        )
    labels = [rule.get("labels", {}).get("slo") for rule in _rules(tmp_path)]
    with django_capture_on_commit_callbacks(execute=True):
        slo.delete()

    assert "chat-util" in labels
    assert "chat-util" not in [rule.get("labels", {}).get("slo") for rule in _rules(tmp_path)]


def test_a_prometheus_that_does_not_answer_is_not_an_error(settings, caplog):
    settings.RACKPILOT_PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"

    assert rule_files.reload_prometheus() is False
    assert "did not reload its rules" in caplog.text
    settings.RACKPILOT_PROMETHEUS_URL = ""
    assert rule_files.reload_prometheus() is False


def _rules(folder: Path) -> list[dict]:
    document = yaml.safe_load((folder / rule_files.RULES_FILE).read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


@pytest.fixture
def prometheus(tmp_path):
    """A Prometheus on docker/prometheus.yml (copied, so targets/ is beside it) with its lifecycle API, as `make up`
    starts it: (its URL, the targets folder)."""
    need(Path(PROMETHEUS).exists(), "prometheus is not installed (apt-get install prometheus)")
    shutil.copy(ROOT / "docker" / "prometheus.yml", tmp_path / "prometheus.yml")
    targets = tmp_path / "targets"
    targets.mkdir()
    port = free_port()
    process = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--web.enable-lifecycle",
        ],
        stdout=(tmp_path / "prometheus.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url)
        yield url, targets
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def _loaded(url: str) -> dict[str, set]:
    """Prometheus's rule groups as it has loaded them: group name -> the SLOs its rules are labelled with."""
    with urllib.request.urlopen(f"{url}/api/v1/rules", timeout=5) as answer:
        groups = json.load(answer)["data"]["groups"]
    return {group["name"]: {rule.get("labels", {}).get("slo") for rule in group["rules"]} for group in groups}


@pytest.mark.integration
def test_prometheus_loads_the_rules_and_reloads_them_when_an_slo_is_added(
    chat, prometheus, settings, django_capture_on_commit_callbacks
):
    url, targets = prometheus
    settings.RACKPILOT_PROMETHEUS_TARGETS_DIR = str(targets)
    settings.RACKPILOT_PROMETHEUS_URL = url
    assert _loaded(url) == {}  # started before the file was there (the glob matched nothing)

    with django_capture_on_commit_callbacks(execute=True):
        Slo.objects.create(name="chat-util", objective="gpu_utilisation", scope="service", service=chat, target=85)

    until(lambda: "chat-util" in _loaded(url).get("rackpilot-slo-recording", set()), what="the SLO's rules loaded")
    loaded = _loaded(url)
    assert {"rackpilot-slo-alerts", "rackpilot-telemetry-recording", "rackpilot-telemetry-recording-5m"} <= set(loaded)
