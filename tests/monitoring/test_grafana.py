"""Grafana's files: dashboards whose every query is valid PromQL (a real promtool parses them), and provisioning
that points Grafana at the Prometheus and the dashboards."""

import io
import json
import re
import shutil
import subprocess
import zipfile

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.monitoring import grafana
from apps.monitoring.metrics import FAMILIES
from tests.live_server import need


def _queries():
    for name, board in grafana.dashboards().items():
        for panel in board["panels"]:
            for target in panel.get("targets", []):
                yield name, panel["title"], target["expr"]


def test_dashboards_are_json_with_one_data_source_and_no_overlapping_panels():
    boards = grafana.dashboards()
    assert len({board["uid"] for board in boards.values()}) == len(boards)
    for board in boards.values():
        json.loads(json.dumps(board))
        cells = set()
        for panel in board["panels"]:
            assert panel["type"] == "row" or panel["datasource"]["uid"] == grafana.DATASOURCE_UID
            position = panel["gridPos"]
            for row in range(position["y"], position["y"] + position["h"]):
                for column in range(position["x"], position["x"] + position["w"]):
                    assert (row, column) not in cells, panel["title"]
                    cells.add((row, column))


def _any(expr: str) -> str:
    for variable in ("$host", "$service", "$training_job"):
        expr = expr.replace(variable, ".*")
    return expr


def test_every_panel_query_is_valid_promql(tmp_path):
    need(shutil.which("promtool"), "needs promtool (Debian package prometheus)")
    rules = [{"record": f"check:panel{number}", "expr": _any(expr)} for number, (_, _, expr) in enumerate(_queries())]
    (tmp_path / "panels.yml").write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))

    checked = subprocess.run(["promtool", "check", "rules", "panels.yml"], cwd=tmp_path, capture_output=True, text=True)

    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_provisioning_names_the_data_source_and_the_dashboard_folder():
    files = grafana.provisioning("http://prometheus.example:9090")
    source = yaml.safe_load(files["datasources/rackpilot.yaml"])["datasources"][0]
    provider = yaml.safe_load(files["dashboards/rackpilot.yaml"])["providers"][0]

    assert source["url"] == "http://prometheus.example:9090" and source["uid"] == grafana.DATASOURCE_UID
    assert provider["options"]["path"] == grafana.DASHBOARD_DIR


def test_the_bundle_zip_holds_every_file():
    archive = zipfile.ZipFile(io.BytesIO(grafana.bundle_zip("http://prometheus:9090")))

    names = set(archive.namelist())

    assert "rackpilot-grafana/provisioning/datasources/rackpilot.yaml" in names
    assert {f"rackpilot-grafana/dashboards/{name}" for name in grafana.dashboards()} <= names


def test_export_command_writes_the_files_and_refuses_a_non_http_url(tmp_path):
    call_command("grafana_export", str(tmp_path), "--prometheus-url", "http://prom:9090")

    assert (tmp_path / "provisioning/datasources/rackpilot.yaml").exists()
    assert json.loads((tmp_path / "dashboards/rackpilot-cluster.json").read_text())["uid"] == "rackpilot-cluster"
    with pytest.raises(CommandError, match="http:// or https://"):
        call_command("grafana_export", str(tmp_path / "other"), "--prometheus-url", "file:///etc/passwd")
    assert not (tmp_path / "other").exists()


def test_the_workloads_dashboard_has_a_job_progress_row_on_rackpilots_training_gauges():
    board = grafana.dashboards()["rackpilot-services.json"]
    panels = board["panels"]
    (row,) = [panel for panel in panels if panel["type"] == "row"]
    assert row["title"] == "Job progress / loss" and row["gridPos"]["w"] == 24
    below = [panel for panel in panels if panel["gridPos"]["y"] > row["gridPos"]["y"]]
    above = [panel for panel in panels if panel["gridPos"]["y"] < row["gridPos"]["y"]]
    assert {panel["title"] for panel in below} == {"Loss", "Step", "Samples/s", "Seconds since the newest step line"}
    assert all("rackpilot_training_" not in panel["targets"][0]["expr"] for panel in above)
    for panel in below:
        expr = panel["targets"][0]["expr"]
        assert 'training_job=~"$training_job"' in expr and "by (training_job)" in expr
    names = set(FAMILIES)
    used = {word for panel in below for word in re.findall(r"rackpilot_\w+", panel["targets"][0]["expr"])}
    assert used <= names  # every panel reads a family /metrics declares
    variables = {variable["name"]: variable for variable in board["templating"]["list"]}
    assert variables["training_job"]["query"]["query"] == "label_values(rackpilot_training_step, training_job)"
    assert len({panel["id"] for panel in panels}) == len(panels)
