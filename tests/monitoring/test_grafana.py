"""Grafana's files: dashboards whose every query is valid PromQL (a real promtool parses them), and provisioning
that points Grafana at the Prometheus and the dashboards."""

import io
import json
import shutil
import subprocess
import zipfile

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.monitoring import grafana
from tests.live_server import need


def _queries():
    for name, board in grafana.dashboards().items():
        for panel in board["panels"]:
            for target in panel["targets"]:
                yield name, panel["title"], target["expr"]


def test_dashboards_are_json_with_one_data_source_and_no_overlapping_panels():
    boards = grafana.dashboards()
    assert len({board["uid"] for board in boards.values()}) == len(boards)
    for board in boards.values():
        json.loads(json.dumps(board))
        cells = set()
        for panel in board["panels"]:
            assert panel["datasource"]["uid"] == grafana.DATASOURCE_UID
            position = panel["gridPos"]
            for row in range(position["y"], position["y"] + position["h"]):
                for column in range(position["x"], position["x"] + position["w"]):
                    assert (row, column) not in cells, panel["title"]
                    cells.add((row, column))


def test_every_panel_query_is_valid_promql(tmp_path):
    need(shutil.which("promtool"), "needs promtool (Debian package prometheus)")
    rules = [
        {"record": f"check:panel{number}", "expr": expr.replace("$host", ".*").replace("$service", ".*")}
        for number, (_, _, expr) in enumerate(_queries())
    ]
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
