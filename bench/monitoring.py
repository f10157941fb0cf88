"""Monitoring at scale on a real Prometheus: 256 GPUs (32 simulated nodes) at 15 s resolution for 30 days, backfilled
from the simulator's series, then the figures the issue asks for.

    .venv/bin/python bench/monitoring.py                        # 32 nodes, 30 days, 15 s
    .venv/bin/python bench/monitoring.py --nodes 8 --days 2     # a quick look
    .venv/bin/python bench/monitoring.py --keep                 # keep var/bench/monitoring/ (its TSDB) afterwards

1. A throwaway SQLite database under var/bench/monitoring/ with the demo's shape at --nodes compute nodes (8 H200
   each) and the demo workloads (a Llama-70B service on gpu001-004, pre-training on gpu005-020, the rest idle), all
   booted and running since before the window; gpu003 power-capped at 450 W for the last 5 days (the throughput SLO
   misses, and its blame should name gpu003). Four SLOs: throughput, p99 latency and energy per million tokens of the
   service, mean GPU utilisation of the cluster.
2. The series the SLOs, the GPU-hours split and the cluster page read, from the simulator's model at every 15 s
   (apps.simulator.telemetry.ClusterTelemetry.samples, service_counters): per GPU DCGM_FI_DEV_GPU_UTIL,
   DCGM_FI_PROF_SM_ACTIVE and DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION; per service vllm:generation_tokens_total and
   the vllm:e2e_request_latency_seconds buckets (the cluster page's power and XID charts query series this backfill
   leaves out: their queries run and answer empty). Written as OpenMetrics one 54 h TSDB block at a time and turned
   into blocks by `promtool tsdb create-blocks-from openmetrics` (each file removed once imported; promtool imports
   one while the next is written).
3. Prometheus (/usr/bin/prometheus) on a free loopback port over those blocks, then, with RACKPILOT_PROMETHEUS_URL
   pointed at it:
   - the four SLOs over 30 days (Prometheus counts the judged and met steps: one subquery each), target <= 2 s;
     and each SLO's whole status (1 h, 24 h, 7 d, 30 d, the latest value, the blame);
   - the GPU-hours split over 30 days;
   - server time of the dashboard (/) and the cluster telemetry page (/telemetry/ for each window), p95 of
     --requests through Django's test client, target <= 300 ms;
   - Rackpilot's /metrics scrape, p95 of 200, target <= 50 ms.
Prints the figures and the load average. It is a script, not a timed test: the machine is shared.
"""

import argparse
import datetime as dt
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
DAY = 86_400
BLOCK_S = 54 * 3600
SERVICE = "chat-llama-70b"
TARGETS = {"slos_30d_s": 2.0, "page_p95_ms": 300.0, "metrics_p95_ms": 50.0}
_PROMETHEUS_GATHER = None  # PrometheusTelemetry.gather, put back after question_times


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=32, help="compute nodes, 8 GPUs each; default 32 (256 GPUs)")
    parser.add_argument("--days", type=float, default=30, help="days of history; default 30")
    parser.add_argument("--step", type=int, default=15, help="seconds between samples; default 15")
    parser.add_argument("--requests", type=int, default=20, help="timed requests per page; default 20")
    parser.add_argument("--keep", action="store_true", help="keep var/bench/monitoring/ afterwards")
    parser.add_argument(
        "--reuse",
        type=Path,
        help="measure again on a kept run's directory (its tsdb/ and rackpilot.sqlite3) instead of backfilling",
    )
    return parser.parse_args()


def setup(var_dir: Path) -> None:
    shutil.rmtree(var_dir, ignore_errors=True)
    var_dir.mkdir(parents=True)
    os.environ.update(RACKPILOT_VAR_DIR=str(var_dir), RACKPILOT_LOG_LEVEL="WARNING", RACKPILOT_PROMETHEUS_URL="")
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()


def load_fleet(nodes: int, since: dt.datetime) -> None:
    from django.core.management import call_command

    from apps.inventory.demo import ClusterShape, load_cluster
    from apps.inventory.models import Node
    from apps.monitoring.models import Slo
    from apps.simulator import services as simulator
    from apps.simulator.models import SimFault
    from apps.workloads.demo import load_workloads
    from apps.workloads.models import InferenceService, TrainingJob

    call_command("migrate", verbosity=0)
    load_cluster(ClusterShape(compute_nodes=nodes))
    load_workloads()
    Node.objects.update(created=since - dt.timedelta(hours=1))
    InferenceService.objects.update(created=since)
    TrainingJob.objects.update(created=since, started_at=since)
    service = InferenceService.objects.get(name=SERVICE)
    capped = Node.objects.get(hostname="gpu003")
    simulator.inject_fault(node=capped, kind="power_cap", target="", parameters={"watts": 450})
    SimFault.objects.update(created=dt.datetime.now(dt.UTC) - dt.timedelta(days=5))
    for name, objective, scope, target in [
        ("chat-throughput", "throughput", "service", 90),
        ("chat-p99", "latency_p99", "service", 100),
        ("chat-energy", "energy_per_mtok", "service", 0.5),
        ("cluster-utilisation", "gpu_utilisation", "cluster", 85),
    ]:
        Slo.objects.create(
            name=name,
            objective=objective,
            scope=scope,
            service=service if scope == "service" else None,
            target=target,
            compliance=0.99,
        )


def block_chunks(start: int, end: int, step: int) -> list[list[int]]:
    """Sample times from start to end, cut where promtool's 54 h blocks begin (it aligns them to multiples of 54 h
    since the epoch and reads its input once per block: one file per block reads each sample once)."""
    times = list(range(start, end + 1, step))
    chunks: dict[int, list[int]] = {}
    for t in times:
        chunks.setdefault(t // BLOCK_S, []).append(t)
    return [chunks[key] for key in sorted(chunks)]


def write_chunk(model, times: list[int], path: Path) -> int:
    """Every series at these times as OpenMetrics; returns the number of samples."""
    from apps.nodeexec.sim_telemetry import LATENCY_BUCKETS, split_counters

    stamps = [str(t) for t in times]
    count = 0
    with path.open("w") as out:
        for hostname in sorted(model.histories):
            rows = list(model.samples(hostname, [float(t) for t in times]))
            util = [f"{int(round(100 * busy))} {s}\n" for (_, busy, *_), s in zip(rows, stamps, strict=True)]
            sm = [f"{sm_active:f} {s}\n" for (_, _, sm_active, *_), s in zip(rows, stamps, strict=True)]
            gpus = sorted({index for row in rows for index in row[3]})
            for index in gpus:
                labels = f'{{Hostname="{hostname}",gpu="{index}"}} '
                present = [k for k, row in enumerate(rows) if index in row[3]]
                for metric, tails in [("DCGM_FI_DEV_GPU_UTIL", util), ("DCGM_FI_PROF_SM_ACTIVE", sm)]:
                    out.write("".join(map(f"{metric}{labels}".__add__, (tails[k] for k in present))))
                prefix = f"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{labels}"
                out.write("".join(f"{prefix}{rows[k][3][index]} {stamps[k]}\n" for k in present))
                count += 3 * len(present)
        for run in model.workloads.serving:
            base = f'service="{run.name}",model_name="{run.model}"'
            parts = [split_counters(model.service_counters(run, float(t))) for t in times]
            out.write(
                "".join(
                    f"vllm:generation_tokens_total{{{base}}} {int(p['generation_tokens'])} {s}\n"
                    for p, s in zip(parts, stamps, strict=True)
                )
            )
            for position, le in enumerate([*LATENCY_BUCKETS, "+Inf"]):
                prefix = f'vllm:e2e_request_latency_seconds_bucket{{{base},le="{le}"}} '
                lines = []
                for p, s in zip(parts, stamps, strict=True):
                    requests = int(p["requests"])
                    value = requests if le == "+Inf" else min(int(p["e2e_buckets"][position]), requests)
                    lines.append(f"{prefix}{value} {s}\n")
                out.write("".join(lines))
            count += 18 * len(times)
        out.write("# EOF\n")
    return count


def backfill(model, start: int, end: int, step: int, tsdb: Path, work: Path) -> dict:
    tsdb.mkdir(parents=True, exist_ok=True)
    started, samples, text_bytes, pending = time.perf_counter(), 0, 0, None
    chunks = block_chunks(start, end, step)
    for number, times in enumerate(chunks):
        path = work / f"block-{number}.om"
        samples += write_chunk(model, times, path)
        text_bytes += path.stat().st_size
        if pending is not None:
            _finish(pending)
        command = [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=54h", str(path)]
        pending = (subprocess.Popen([*command, str(tsdb)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE), path)
        print(f"  block {number + 1}/{len(chunks)}: {samples / 1e6:.1f} M samples so far", file=sys.stderr, flush=True)
    if pending is not None:
        _finish(pending)
    return {"samples": samples, "text_gb": text_bytes / 1e9, "backfill_s": time.perf_counter() - started}


def _finish(pending) -> None:
    process, path = pending
    _, errors = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"promtool failed on {path}: {errors.decode()[-2000:]}")
    path.unlink()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_prometheus(tsdb: Path, work: Path) -> tuple[subprocess.Popen, str]:
    config = work / "prometheus.yml"
    config.write_text("global: {scrape_interval: 15s}\nscrape_configs: []\n")
    return run_prometheus(config, tsdb, work, "--storage.tsdb.retention.time=400d")


def run_prometheus(config: Path, tsdb: Path, work: Path, *flags: str) -> tuple[subprocess.Popen, str]:
    """Prometheus on `config` and `tsdb`, on a free loopback port, its log in work/; (the process, its URL) once
    it says it is ready."""
    port = free_port()
    log = (work / "prometheus.log").open("w")
    process = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tsdb}", f"--web.listen-address=127.0.0.1:{port}"]
        + list(flags),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as answer:
                if answer.status == 200:
                    return process, url
        except OSError:
            time.sleep(0.5)
    process.kill()
    raise RuntimeError(f"Prometheus did not become ready; see {work / 'prometheus.log'}")


def backfill_rules(url: str, tsdb: Path, work: Path) -> dict:
    """The SLOs' recording rule (rackpilot:slo_good) and the telemetry pages' (telemetry_rules), every minute,
    evaluated over the stored range by `promtool tsdb create-blocks-from rules`, as a Prometheus running the generated
    rules would have recorded them.
    (promtool cannot backfill rules that read other recorded rules, so the burn-rate rules are left out.)"""
    import yaml

    from apps.monitoring import slo
    from apps.monitoring.models import Slo
    from apps.monitoring.telemetry import telemetry_rules

    document = slo.rules([row.spec() for row in Slo.objects.select_related("service", "training_job", "rack")])
    group = document["groups"][0]
    group["rules"] = [rule for rule in group["rules"] if rule.get("record") == "rackpilot:slo_good"]
    # A kept TSDB (--reuse) has the rules it recorded before: only the others are recorded now, and only those that
    # read a series the backfill wrote (not the power and XID panels').
    with urllib.request.urlopen(f"{url}/api/v1/label/__name__/values", timeout=60) as answer:
        stored = set(json.load(answer)["data"])
    groups = []
    for one in (group, *telemetry_rules()):
        left = [
            rule
            for rule in one["rules"]
            if rule["record"] not in stored and any(name in rule["expr"] for name in stored)
        ]
        if left:
            groups.append({**one, "rules": left})
    if not groups:
        return {"rules_backfill_s": 0.0, "rules_recorded": []}
    rules = work / "backfill.rules.yml"
    rules.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    metas = [json.loads(meta.read_text()) for meta in tsdb.glob("*/meta.json")]
    first = min(meta["minTime"] for meta in metas) // 1000
    last = max(meta["maxTime"] for meta in metas) // 1000 - 1
    output = work / "rule-blocks"
    started = time.perf_counter()
    command = [PROMTOOL, "tsdb", "create-blocks-from", "rules", f"--url={url}", f"--start={first + 3600}"]
    command += [f"--end={last}", f"--output-dir={output}", "--eval-interval=1m", str(rules)]
    subprocess.run(command, check=True, capture_output=True)
    for block in output.iterdir():
        shutil.move(str(block), tsdb / block.name)
    recorded = [rule["record"] for one in groups for rule in one["rules"]]
    return {"rules_backfill_s": time.perf_counter() - started, "rules_recorded": recorded}


def timed(function) -> tuple[float, object]:
    started = time.perf_counter()
    value = function()
    return time.perf_counter() - started, value


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (/proc/PID/stat), for Prometheus's share of a request."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def p95_ms(function, requests: int, warmup: int = 2, *, prometheus_pid: int | None = None, before=None) -> dict:
    """Wall time of each call (p50, p95, max) and CPU time, which the machine's load does not change: this process's
    (Django's, its query threads included) and Prometheus's, means (Linux counts them in 10 ms ticks). `before` runs
    ahead of each call, untimed."""
    for _ in range(warmup):
        if before:
            before()
        function()
    times, cpu, prometheus_cpu = [], [], []
    for _ in range(requests):
        if before:
            before()
        started_cpu = time.process_time()
        started_prometheus = cpu_seconds(prometheus_pid) if prometheus_pid else 0.0
        seconds, _ = timed(function)
        cpu.append((time.process_time() - started_cpu) * 1000)
        if prometheus_pid:
            prometheus_cpu.append((cpu_seconds(prometheus_pid) - started_prometheus) * 1000)
        times.append(seconds * 1000)
    times.sort()
    return {
        "p50": statistics.median(times),
        "p95": times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))],
        "max": times[-1],
        "cpu_mean": statistics.fmean(cpu),
        "prometheus_cpu_mean": statistics.fmean(prometheus_cpu) if prometheus_cpu else 0.0,
    }


def question_times(window_name: str) -> dict:
    """The cluster page's questions asked one at a time, each timed (ms): where a request's wait goes."""
    from apps.monitoring import services
    from apps.monitoring.telemetry import PrometheusTelemetry, Window

    spent: dict = {}

    def one_by_one(self, questions):
        answers = {}
        for key, question in questions.items():
            seconds, answers[key] = timed(question)
            spent[key if isinstance(key, str) else key[0]] = round(seconds * 1000, 1)
        return answers

    PrometheusTelemetry.gather = one_by_one
    try:
        seconds, _ = timed(lambda: services.cluster_page(window=Window.named(window_name)))
    finally:
        PrometheusTelemetry.gather = _PROMETHEUS_GATHER
    spent["whole page context"] = round(seconds * 1000, 1)
    return spent


def measure(url: str, requests: int, prometheus_pid: int) -> dict:
    from django.conf import settings
    from django.test import Client

    from apps.accounts.choices import Role
    from apps.monitoring import gpuhours, services
    from apps.monitoring.models import Slo
    from apps.monitoring.telemetry import PrometheusTelemetry, SimulatorTelemetry, Window
    from tests import factories

    global _PROMETHEUS_GATHER
    _PROMETHEUS_GATHER = PrometheusTelemetry.gather

    settings.RACKPILOT_PROMETHEUS_URL = url
    settings.RACKPILOT_PROMETHEUS_TIMEOUT_SECONDS = 60
    settings.ALLOWED_HOSTS = ["*"]
    source = PrometheusTelemetry(url, timeout=60)
    rows = list(Slo.objects.select_related("service", "training_job", "rack").order_by("name"))
    specs = [row.spec() for row in rows]
    figures: dict = {}

    seconds, budgets = timed(lambda: [services.slo_budget(source, spec, "30d") for spec in specs])
    figures["slos_30d_s"] = seconds
    figures["slos_30d"] = {
        spec.name: {"judged": b.judged, "good": b.good, "compliance": b.compliance, "met": b.met}
        for spec, b in zip(specs, budgets, strict=True)
    }
    seconds, statuses = timed(lambda: services.slo_statuses(rows, source=source))
    figures["slo_statuses_s"] = seconds
    figures["blame"] = {status["slo"].name: [d["node"].hostname for d in status["draggers"]] for status in statuses}
    figures["slo_errors"] = [status["error"] for status in statuses if status["error"]]
    window = Window.named("30d")
    hosts = sorted({spec_host for spec in specs for spec_host in spec.hosts})
    seconds, joules = timed(lambda: source.energy_joules(hostnames=hosts, start=window.start, end=window.end))
    figures["energy_30d_s"] = seconds
    figures["energy_30d_kwh"] = joules / 3.6e6
    seconds, joules = timed(lambda: source.fleet_energy_joules(hostnames=hosts, start=window.start, end=window.end))
    figures["fleet_energy_30d_s"], figures["fleet_energy_30d_kwh"] = seconds, joules / 3.6e6
    figures["energy_30d_kwh_simulator"] = (
        SimulatorTelemetry().energy_joules(hostnames=hosts, start=window.start, end=window.end) / 3.6e6
    )
    seconds, split = timed(lambda: gpuhours.gpu_hours(window=Window.named("30d"), source=source))
    figures["gpu_hours_30d_s"] = seconds
    figures["gpu_hours_30d"] = split.cluster.as_dict()

    user = factories.make_user(role=Role.VIEWER, username="bench")
    client = Client()
    client.force_login(user)

    def get(path):
        def call():
            answer = client.get(path)
            if answer.status_code != 200:
                raise RuntimeError(f"{path} answered {answer.status_code}")
            if b"could not reach Prometheus" in answer.content or b"refused the query" in answer.content:
                raise RuntimeError(f"{path} shows a telemetry error")
            return answer

        return call

    paths = ["/", *[f"/telemetry/?window={w}" for w in ("1h", "24h", "7d", "30d")]]
    # Every request asks Prometheus (nothing is kept between requests).
    figures["pages"] = {path: p95_ms(get(path), requests, prometheus_pid=prometheus_pid) for path in paths}
    figures["questions_ms"] = {name: question_times(name) for name in ("7d", "30d")}
    figures["metrics"] = p95_ms(get("/metrics"), 200, warmup=20, prometheus_pid=prometheus_pid)
    return figures


def reuse(args, var_dir: Path) -> None:
    """Measure on a kept run: its blocks and database copied into var_dir (its figures' window ends now)."""
    shutil.rmtree(var_dir, ignore_errors=True)
    shutil.copytree(args.reuse, var_dir, ignore=shutil.ignore_patterns("wal", "chunks_head", "queries.active", "lock"))
    os.environ.update(RACKPILOT_VAR_DIR=str(var_dir), RACKPILOT_LOG_LEVEL="WARNING", RACKPILOT_PROMETHEUS_URL="")
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    get_user_model().objects.filter(username="bench").delete()
    work = var_dir / "work"
    work.mkdir(parents=True, exist_ok=True)
    print(f"reusing {args.reuse}; load average before: {os.getloadavg()}", file=sys.stderr, flush=True)
    process, url = start_prometheus(var_dir / "tsdb", work)
    figures = {"samples": 0, "text_gb": 0.0, "backfill_s": 0.0}
    try:
        figures |= backfill_rules(url, var_dir / "tsdb", work)
        process.terminate()
        process.wait(timeout=60)
        process, url = start_prometheus(var_dir / "tsdb", work)
        figures |= measure(url, args.requests, process.pid)
    finally:
        process.terminate()
        process.wait(timeout=30)
    figures["load_average"] = os.getloadavg()
    figures["nodes"], figures["days"], figures["step"] = args.nodes, args.days, args.step
    report(figures)
    if not args.keep:
        shutil.rmtree(var_dir, ignore_errors=True)


def main() -> None:
    args = parse_args()
    var_dir = ROOT / "var" / "bench" / "monitoring"
    if args.reuse:
        reuse(args, var_dir)
        return
    setup(var_dir)
    from apps.monitoring.telemetry import current_workloads
    from apps.simulator import services as simulator

    now = int(time.time()) // args.step * args.step
    end = now - args.step
    start = end - int(args.days * DAY) - 13 * 3600  # a 30-day window aligned to its 12 h step, and rates before it
    load_fleet(args.nodes, dt.datetime.fromtimestamp(start, dt.UTC) - dt.timedelta(hours=1))
    model = simulator.telemetry_model(workloads=current_workloads())
    print(
        f"{args.nodes} nodes ({8 * args.nodes} GPUs), {args.days:g} days at {args.step} s; load average before: "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}",
        file=sys.stderr,
        flush=True,
    )
    tsdb, work = var_dir / "tsdb", var_dir / "work"
    work.mkdir(parents=True, exist_ok=True)
    figures = backfill(model, start, end, args.step, tsdb, work)
    process, url = start_prometheus(tsdb, work)
    try:
        figures |= backfill_rules(url, tsdb, work)
        process.terminate()
        process.wait(timeout=60)
        process, url = start_prometheus(tsdb, work)
        figures |= measure(url, args.requests, process.pid)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
    figures["load_average"] = os.getloadavg()
    figures["nodes"], figures["days"], figures["step"] = args.nodes, args.days, args.step
    report(figures)
    if not args.keep:
        shutil.rmtree(var_dir, ignore_errors=True)


def report(figures: dict) -> None:
    verdict = {True: "yes", False: "NO"}
    print(
        f"\n{figures['nodes'] * 8} GPUs, {figures['days']:g} days at {figures['step']} s: "
        f"{figures['samples'] / 1e6:.1f} M samples ({figures['text_gb']:.1f} GB of OpenMetrics) backfilled in "
        f"{figures['backfill_s']:.0f} s"
    )
    if "rules_backfill_s" in figures:
        print(
            f"recorded over the range by promtool in {figures['rules_backfill_s']:.0f} s: "
            f"{', '.join(figures.get('rules_recorded', [])) or 'nothing (all were recorded already)'}"
        )
    slos = figures["slos_30d_s"]
    print(
        f"four SLOs over 30 d: {slos:.2f} s (<= {TARGETS['slos_30d_s']:g} s: {verdict[slos <= TARGETS['slos_30d_s']]})"
    )
    for name, budget in figures["slos_30d"].items():
        compliance = "no data" if budget["compliance"] is None else f"{100 * budget['compliance']:.2f} %"
        print(f"  {name:<22} judged {budget['judged']:>6}  met {budget['good']:>6}  {compliance}  met: {budget['met']}")
    print(f"their whole status (4 windows, latest, blame): {figures['slo_statuses_s']:.2f} s")
    for name, hosts in figures["blame"].items():
        print(f"  {name:<22} dragged by {', '.join(hosts) or '-'}")
    if figures["slo_errors"]:
        print(f"  errors: {figures['slo_errors']}")
    print(
        f"GPU energy over 30 d: {figures['energy_30d_kwh']:.0f} kWh from Prometheus in {figures['energy_30d_s']:.2f} s "
        f"(the simulator's integral: {figures['energy_30d_kwh_simulator']:.0f} kWh); from the recorded 5-minute tiles "
        f"{figures.get('fleet_energy_30d_kwh', 0):.0f} kWh in {figures.get('fleet_energy_30d_s', 0):.2f} s"
    )
    split = figures["gpu_hours_30d"]
    print(
        f"GPU-hours over 30 d: {figures['gpu_hours_30d_s']:.2f} s; {split['gpu_hours']:.0f} h: busy "
        f"{100 * split['busy_share']:.1f} %, allocated idle {100 * split['idle_share']:.1f} %, unallocated "
        f"{100 * split['unallocated_share']:.1f} %"
    )
    load = " ".join(f"{x:.1f}" for x in figures["load_average"])
    for key, heading in [
        ("pages", "every request asking Prometheus"),
    ]:
        print(f"server time, ms, {heading} (wall p50 / p95 / max; mean CPU ms Django + Prometheus), load {load}:")
        for path, t in figures.get(key, {}).items():
            ok = verdict[t["p95"] <= TARGETS["page_p95_ms"]]
            print(
                f"  {path:<22} {t['p50']:>7.1f} / {t['p95']:>7.1f} / {t['max']:>7.1f}  (p95 <= 300 ms: {ok});"
                f"  CPU {t.get('cpu_mean', 0):.1f} + {t.get('prometheus_cpu_mean', 0):.1f}"
            )
    for name, spent in figures.get("questions_ms", {}).items():
        print(f"  cluster page {name}, its questions one at a time (ms): {spent}")
    t = figures["metrics"]
    ok = verdict[t["p95"] <= TARGETS["metrics_p95_ms"]]
    print(
        f"  {'/metrics':<22} {t['p50']:>7.1f} / {t['p95']:>7.1f} / {t['max']:>7.1f}  (p95 <= 50 ms: {ok});"
        f"  CPU {t.get('cpu_mean', 0):.1f}"
    )
    print(f"load average after: {' '.join(f'{x:.1f}' for x in figures['load_average'])} (2 CPUs)")
    print(json.dumps(figures, default=str))


if __name__ == "__main__":
    main()
