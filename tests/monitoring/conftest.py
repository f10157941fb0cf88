"""Monitoring fixtures: a real Prometheus scraping the simulated exporters (no prometheus binary: skip here, fail in
CI), BMC settings on demo nodes, and a BMC poll run in this process."""

import shutil
import socket
import subprocess
import urllib.request
from pathlib import Path

import pytest

from apps.inventory.models import Node
from apps.jobs.services import TargetSpec, create_job
from apps.monitoring.bmc import logins
from tests import factories
from tests.live_server import need
from tests.waits import until

from .emulators import PASSWORD, USER, start_ipmi_sim, start_sushy

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
SCRAPE_SECONDS = 2


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_ready(url: str) -> None:
    def ready() -> bool:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as response:
                return response.status == 200
        except OSError:
            return False

    until(ready, what=f"Prometheus at {url}")


@pytest.fixture
def start_prometheus(tmp_path):
    """start_prometheus(targets_dir, rules=None) -> its URL; with `rules` (a rules file's path) it loads them, as
    docker/prometheus.yml loads Rackpilot's. The process is stopped after the test."""
    need(Path(PROMETHEUS).exists(), "prometheus is not installed (apt-get install prometheus)")
    processes = []

    def start(targets: Path, rules: Path | None = None) -> str:
        port = free_port()
        config = tmp_path / "prometheus.yml"
        config.write_text(
            f"global: {{scrape_interval: {SCRAPE_SECONDS}s, scrape_timeout: {SCRAPE_SECONDS}s}}\n"
            + (f"rule_files: ['{rules}']\n" if rules else "")
            + "scrape_configs:\n"
            "  - job_name: dcgm\n"
            f"    file_sd_configs: [{{files: ['{targets}/dcgm.json'], refresh_interval: 1s}}]\n"
            "  - job_name: vllm\n"
            f"    file_sd_configs: [{{files: ['{targets}/vllm.json'], refresh_interval: 1s}}]\n"
            "  - job_name: node\n"
            f"    file_sd_configs: [{{files: ['{targets}/node.json'], refresh_interval: 1s}}]\n"
        )
        log = (tmp_path / "prometheus.log").open("w")
        process = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        processes.append(process)
        url = f"http://127.0.0.1:{port}"
        wait_ready(url)
        return url

    yield start
    for process in processes:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture
def gpu_node(demo_cluster):
    return Node.objects.get(hostname="gpu001")


@pytest.fixture
def sim_bmc(gpu_node):
    """gpu001's BMC set up with the simulated BMCs' account."""

    def make(node=None, *, protocol="ipmi", password=None, user=None):
        return factories.make_sim_bmc(node or gpu_node, protocol=protocol, user=user, password=password)

    return make


@pytest.fixture
def poll(run_shards):
    """poll(*nodes, transport="sim") -> the finished bmc-poll job."""

    def run(*nodes, transport="sim"):
        job = create_job(
            kind="bmc-poll", targets=TargetSpec(nodes=tuple(node.hostname for node in nodes)), transport=transport
        )
        return run_shards(job)

    return run


@pytest.fixture
def promtool(tmp_path):
    """promtool(*args) run in tmp_path (rules files written there)."""
    need(shutil.which("promtool"), "needs promtool (Debian package prometheus)")

    def run(*args):
        return subprocess.run(["promtool", *args], cwd=tmp_path, capture_output=True, text=True, timeout=60)

    return run


# --- the real BMC emulators (tests/monitoring/emulators.py): skipped without them, failing under CI=true ---------


@pytest.fixture
def ipmi_sim(tmp_path):
    emulator = start_ipmi_sim(tmp_path)
    yield emulator
    emulator.stop()


@pytest.fixture
def sushy(tmp_path):
    emulator = start_sushy(tmp_path)
    yield emulator
    emulator.stop()


@pytest.fixture
def emulated_node(gpu_node):
    def make(protocol, port, *, password=PASSWORD, verify_tls=True):
        logins.save_bmc(
            node=gpu_node,
            address="127.0.0.1",
            protocol=protocol,
            port=port,
            user=USER,
            verify_tls=verify_tls,
            password=password,
        )
        return Node.objects.get(pk=gpu_node.pk)

    return make
