"""Slurm's HealthCheckProgram (scripts/rackpilot-healthcheck) run as slurmd would run it, against Rackpilot served by
uvicorn and a real private slurmctld: an unhealthy node is drained with Rackpilot's reason, a healthy one is left
alone, and a Rackpilot it cannot reach drains nothing. And the API it asks: /api/health/nodes/<node>/."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from apps.inventory.choices import GpuHealth
from apps.inventory.models import Gpu
from apps.parsers.slurm import SINFO_FORMAT, parse_sinfo_nodes
from apps.schedulers.services import scheduled_nodes
from tests import factories
from tests.live_server import need

from .slurmctld import missing_binaries, start_controller

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "rackpilot-healthcheck"


def healthcheck(controller, *, url: str, token_file: Path, node: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in controller.env.items() if not key.startswith("RACKPILOT_")}
    env.update(RACKPILOT_URL=url, RACKPILOT_TOKEN_FILE=str(token_file), SLURMD_NODENAME=node)
    return subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.django_db(transaction=True)
def test_the_script_drains_an_unhealthy_node_with_rackpilots_reason(demo_cluster, live_server_url, tmp_path, viewer):
    missing = missing_binaries()
    need(not missing, f"Slurm is not installed here ({', '.join(missing)} missing): apt-get install slurmctld")
    Gpu.objects.filter(node__hostname="gpu003", index=3).update(health=GpuHealth.FAILED)
    token_file = tmp_path / "rackpilot.token"
    token_file.write_text(factories.make_token(viewer) + "\n")
    nodes = list(scheduled_nodes().order_by("hostname").values_list("hostname", flat=True))
    controller = start_controller(tmp_path / "slurm", nodes)
    try:
        sick = healthcheck(controller, url=live_server_url, token_file=token_file, node="gpu003")
        well = healthcheck(controller, url=live_server_url, token_file=token_file, node="gpu004")
        away = healthcheck(controller, url="http://127.0.0.1:9", token_file=token_file, node="gpu005")
        listed = parse_sinfo_nodes(controller.run("sinfo", "-N", "-h", "-o", SINFO_FORMAT).stdout).by_name()
        again = healthcheck(controller, url=live_server_url, token_file=token_file, node="gpu003")
        listed_again = parse_sinfo_nodes(controller.run("sinfo", "-N", "-h", "-o", SINFO_FORMAT).stdout).by_name()
    finally:
        controller.stop()
    assert sick.returncode == 0, sick.stderr
    assert listed["gpu003"].drain_state == "DRAINED" and listed["gpu003"].reason == "rackpilot: GPU 3 is failed"
    assert well.returncode == 0 and not listed["gpu004"].drained
    assert away.returncode == 1 and "nothing drained" in away.stderr and not listed["gpu005"].drained
    assert again.returncode == 0 and listed_again["gpu003"].reason_time == listed["gpu003"].reason_time  # kept


@pytest.mark.django_db
def test_the_api_answers_one_node_for_a_token_and_nobody_else(demo_cluster, api_as, api_client, viewer):
    Gpu.objects.filter(node__hostname="gpu003", index=3).update(health=GpuHealth.FAILED)
    answer = api_as(viewer).get("/api/health/nodes/gpu003/")
    assert answer.status_code == 200
    assert answer.json() == {
        "node": "gpu003",
        "healthy": False,
        "state": "unhealthy",
        "reasons": ["GPU 3 is failed"],
        "events": [],
    }
    assert api_as(viewer).get("/api/health/nodes/gpu004/").json()["healthy"] is True
    missing = api_as(viewer).get("/api/health/nodes/nosuch/")
    assert missing.status_code == 404 and "nosuch" in missing.json()["detail"]
    assert api_as(viewer).get("/api/health/nodes/mgmt01/").status_code == 404  # not a compute node
    assert api_client.get("/api/health/nodes/gpu003/").status_code in (401, 403)


def test_the_script_needs_nothing_but_python(tmp_path):
    """It runs on nodes without Rackpilot installed: standard library only, and no address means no drain."""
    imports = [line for line in SCRIPT.read_text().splitlines() if line.startswith(("import ", "from "))]
    assert all(line.split()[1].split(".")[0] in sys.stdlib_module_names for line in imports), imports
    env = {key: value for key, value in os.environ.items() if not key.startswith("RACKPILOT_")}
    env["SLURMD_NODENAME"] = "gpu001"
    answer = subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert answer.returncode == 1 and "RACKPILOT_URL is not set" in answer.stderr
