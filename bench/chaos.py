"""Chaos benchmark: a simulated job on the services wiring survives a killed worker, a Redis restart and an ASGI
server restart, and its websocket watchers see every event once.

The wiring as `make up` starts it, each part its own process: uvicorn serving portal.asgi, job workers
(`-Q jobs --concurrency 1`), a system worker (`-Q system`), beat (which also reaps in-process), PostgreSQL from
DATABASE_URL and a redis-server of this script's own on a free port (append-only, as docker/compose.yaml runs it;
never the shared one). Worker-loss settings are the defaults (stale 20 s, reaper every 5 s) unless overridden in
the environment.

A `sleep` job on the sim transport (--nodes nodes in two shards, --steps steps of --seconds each) gives a steady
stream of events; --clients websocket clients follow it as the job page does (static/js/jobs.js): replay from
?after=<last seq seen>, drop duplicates, refill a gap over REST, after a close fetch what is missing over REST and
reconnect (backing off 2, 4, 8 … s after failed connects), polling REST every 2 s after three failed connects or a
4503. While the job runs the script
  1. SIGKILLs the worker running shard 0 (a supervisor starts a new one, as compose's restart policy would),
  2. stops its Redis, keeps it down --redis-down seconds, starts it again,
  3. stops the ASGI server (SIGTERM) and starts a new one on the same port.
It prints, per client, the events delivered (live over the websocket / refilled over REST), lost and duplicated
against the job's stored events; the seconds until the worker's loss was surfaced (the reaper's event); the seconds
from Redis being back to the first event pushed live and to the first job progress; and whether the job finished.
Targets: 0 lost, worker loss surfaced in <= 30 s, recovery from Redis within seconds of it coming back.

Usage: DATABASE_URL=postgres://… python bench/chaos.py [--nodes 128] [--steps 20] [--seconds 1] [--clients 5]
       [--redis-down 3] [--volatile-redis]
"""

import argparse
import asyncio
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TERMINAL = {"succeeded", "failed", "canceled", "error"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_port(port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                sys.exit(f"nothing listens on port {port} after {timeout} s")
            time.sleep(0.05)


class Service:
    """One process of the wiring, in a session of its own, its output in a log file."""

    def __init__(self, name: str, argv: list[str], logs: Path, env: dict):
        self.name, self.argv, self.log, self.env = name, argv, logs / f"{name}.log", env
        self.process: subprocess.Popen | None = None

    def start(self) -> "Service":
        with open(self.log, "ab") as output:  # the child keeps its own copy of the descriptor
            self.process = subprocess.Popen(
                self.argv, cwd=ROOT, env=self.env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self

    def signal(self, sig: int) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, sig)

    def stop(self, timeout: float = 15) -> None:
        if self.process is None:
            return
        self.signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.process.wait()

    def wait_for(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log.read_text(errors="replace"):
            if self.process.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"{self.name} did not start; see {self.log}")
            time.sleep(0.1)


def celery(name: str, logs: Path, env: dict, *args: str) -> Service:
    argv = [sys.executable, "-m", "celery", "-A", "portal", *args, "--loglevel", "INFO"]
    return Service(name, argv, logs, env)


def job_worker(name: str, logs: Path, env: dict) -> Service:
    return celery(
        name, logs, env, "worker", "-Q", "jobs", "--concurrency", "1", "--hostname", f"{name}@%h",
        "--without-gossip", "--without-mingle", "--without-heartbeat",
    )  # fmt: skip


def redis_service(port: int, logs: Path, *, volatile: bool) -> Service:
    persistence = ["--appendonly", "no"] if volatile else ["--appendonly", "yes", "--appendfsync", "everysec"]
    argv = [shutil.which("redis-server"), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(logs)]
    service = Service(f"redis-{port}", argv + persistence, logs, {})
    service.port = port
    return service


class Watcher:
    """One browser on the job page, as static/js/jobs.js behaves: the seqs it saw, and how each one came."""

    def __init__(self, index: int, base: str, job_id: str, cookie: str, origin: str):
        self.index, self.base, self.job_id, self.cookie, self.origin = index, base, job_id, cookie, origin
        self.last_seq = 0
        self.live: dict[int, float] = {}  # seq -> when it arrived over the websocket
        self.refilled: dict[int, float] = {}  # seq -> when it arrived over REST
        self.duplicates = 0  # events that reached this client a second time (the page drops them)
        self.out_of_order = 0
        self.status = ""
        self.connects = 0
        self.refusals: list[int] = []

    def _add(self, event: dict, into: dict) -> None:
        seq = event["seq"]
        if seq in self.live or seq in self.refilled:
            self.duplicates += 1
            return
        if seq != self.last_seq + 1:
            self.out_of_order += 1
        self.last_seq = max(self.last_seq, seq)
        into[seq] = time.time()

    def _get(self, path: str) -> dict:
        headers = {"Cookie": self.cookie, "Accept": "application/json"}
        request = urllib.request.Request(self.base + path, headers=headers)
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    async def fetch_missing(self) -> bool:
        """Everything after last_seq over REST, page by page (the page's fetchMissing); False when it failed."""
        while True:
            try:
                page = await asyncio.to_thread(self._get, f"/api/jobs/{self.job_id}/events/?after={self.last_seq}")
            except (OSError, urllib.error.URLError, ValueError):
                return False
            for event in page["events"]:
                if event["seq"] > self.last_seq:
                    self._add(event, self.refilled)
                else:
                    self.duplicates += 1
            self.status = page["job_status"]
            if not page["more"]:
                return True

    async def events(self, frame_events: list[dict]) -> None:
        pending = [e for e in frame_events if e["seq"] > self.last_seq]
        self.duplicates += len(frame_events) - len(pending)
        if pending and pending[0]["seq"] > self.last_seq + 1:  # a gap: refill over REST first, as the page does
            await self.fetch_missing()
        for event in pending:
            if event["seq"] > self.last_seq:
                self._add(event, self.live)

    async def run(self, ws_base: str) -> None:
        import websockets

        failures, polling = 0, False
        while True:
            opened = False
            code = None
            try:
                async with websockets.connect(
                    f"{ws_base}/ws/jobs/{self.job_id}/?after={self.last_seq}",
                    additional_headers=[("Cookie", self.cookie)],
                    origin=self.origin,
                    max_queue=None,
                    open_timeout=10,
                ) as ws:
                    self.connects += 1
                    async for message in ws:
                        opened, failures, polling = True, 0, False
                        frame = json.loads(message)
                        await self.events(frame.get("events") or [])
                        if frame.get("job"):
                            self.status = frame["job"]["status"]
                        if self.status in TERMINAL:  # the page stays connected; this client is done
                            break
                    code = ws.close_code
            except (TimeoutError, OSError, websockets.InvalidHandshake) as error:
                code = getattr(error, "code", None)
            except websockets.ConnectionClosed as error:
                code = error.rcvd.code if error.rcvd else None
            if code and code >= 4000:
                self.refusals.append(code)
            if self.status in TERMINAL and opened:
                await self.fetch_missing()  # finished: catch up once in case the last push was lost
                return
            if not opened:
                failures += 1
            # The page polls REST every 2 s after three failed connects or a 4503, until a socket opens again.
            polling = polling or failures >= 3 or code == 4503
            wake = time.monotonic() + (0.3 if opened else min(30, 2**failures))
            while (left := wake - time.monotonic()) > 0:
                await asyncio.sleep(min(2, left) if polling else left)
                if polling:
                    await self.fetch_missing()
            await self.fetch_missing()
            if self.status in TERMINAL:
                return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=128, help="in two shards")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=1.0, help="each step's sleep (sim)")
    parser.add_argument("--clients", type=int, default=5)
    parser.add_argument("--redis-down", type=float, default=3.0, help="seconds Redis stays down")
    parser.add_argument("--volatile-redis", action="store_true", help="Redis without its append-only file")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        sys.exit("bench/chaos.py needs DATABASE_URL on PostgreSQL (the services wiring's processes share it)")
    if shutil.which("redis-server") is None:
        sys.exit("bench/chaos.py needs redis-server (Debian package redis-server): it restarts a Redis of its own")
    logs = Path(tempfile.mkdtemp(prefix="rackpilot-chaos-"))
    redis_port, http_port = free_port(), free_port()
    os.environ.update(
        {
            "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
            "RACKPILOT_SECRET_KEY": "bench-chaos",
            "RACKPILOT_SECRETS_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode(),  # a Fernet key for this run
            "RACKPILOT_LOG_LEVEL": "INFO",
            "RACKPILOT_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "RACKPILOT_JOB_SHARD_SIZE": str(-(-args.nodes // 2)),
            "RACKPILOT_VAR_DIR": str(logs),
            "DJANGO_SETTINGS_MODULE": "portal.settings",
            "PYTHONPATH": str(ROOT),
        }
    )
    env = dict(os.environ)
    redis = redis_service(redis_port, logs, volatile=args.volatile_redis).start()
    wait_port(redis_port)
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.contrib.sessions.backends.db import SessionStore
    from django.core.management import call_command

    from apps.inventory.choices import NodeRole
    from apps.inventory.models import Node

    call_command("migrate", verbosity=0)
    hostnames = [f"chaos-{i:04d}" for i in range(args.nodes)]
    have = set(Node.objects.filter(hostname__in=hostnames).values_list("hostname", flat=True))
    Node.objects.bulk_create([Node(hostname=h, role=NodeRole.COMPUTE) for h in hostnames if h not in have])
    user = get_user_model().objects.filter(username="chaos-bench").first()
    user = user or get_user_model().objects.create_user("chaos-bench", password="x" * 12, role="operator")
    session = SessionStore()
    session.update(
        {
            "_auth_user_id": str(user.pk),
            "_auth_user_backend": "django.contrib.auth.backends.ModelBackend",
            "_auth_user_hash": user.get_session_auth_hash(),
        }
    )
    session.create()

    uvicorn_argv = [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(http_port)]
    uvicorn_argv += ["--log-level", "warning", "portal.asgi:application"]
    asgi = Service("asgi", uvicorn_argv, logs, env)
    workers = [job_worker(f"jobs{n}", logs, env) for n in range(2)]
    system = celery("system", logs, env, "worker", "-Q", "system", "--concurrency", "1", "--hostname", "system@%h")
    system.argv += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    beat = celery("beat", logs, env, "beat", "--schedule", str(logs / "celerybeat-schedule"))
    services = [asgi, *workers, system, beat]
    for service in services:
        service.start()
    print(
        f"chaos bench: {os.cpu_count()} CPUs ({load()}), PostgreSQL, own Redis on :{redis_port} "
        f"({'volatile' if args.volatile_redis else 'append-only'}), uvicorn, 2 job workers, system worker, beat; "
        f"stale {settings.RACKPILOT_JOB_STALE_SECONDS} s, reaper every {settings.RACKPILOT_JOB_REAPER_SECONDS} s; "
        f"logs in {logs}",
        flush=True,
    )
    try:
        for worker in workers:
            worker.wait_for("ready.")
        wait_port(http_port)
        result = asyncio.run(chaos(args, asgi, workers, redis, logs, env, http_port, session.session_key))
    finally:
        for service in [*services, *workers[2:]]:
            service.stop()
        redis.stop()
    report(args, *result)
    print(f"({load()}; the machine is shared with other work)")


async def chaos(args, asgi, workers, redis, logs, env, http_port, session_key):
    from asgiref.sync import sync_to_async

    from apps.jobs import services
    from apps.jobs.models import Job, JobShard

    job = await sync_to_async(services.create_job)(
        kind="sleep",
        targets=services.TargetSpec(nodes=tuple(f"chaos-{i:04d}" for i in range(args.nodes))),
        parameters={"seconds": args.seconds, "steps": args.steps},
        transport="sim",
    )  # enqueued on commit, to the script's Redis
    base, ws_base = f"http://127.0.0.1:{http_port}", f"ws://127.0.0.1:{http_port}"
    watchers = [Watcher(i, base, str(job.public_id), f"sessionid={session_key}", base) for i in range(args.clients)]
    tasks = [asyncio.create_task(w.run(ws_base)) for w in watchers]
    times: dict[str, float] = {}

    async def shard_zero():
        return await sync_to_async(lambda: JobShard.objects.filter(job=job, index=0).first())()

    # 1. a worker SIGKILLed mid-job (a few seconds into shard 0), and a supervisor's replacement
    while True:
        shard = await shard_zero()
        if shard and shard.status == "running" and shard.started and time.time() - shard.started.timestamp() > 3:
            break
        await asyncio.sleep(0.1)
    victim = next(w for w in workers if shard.worker.startswith(f"{w.name}@"))
    victim.signal(signal.SIGKILL)
    times["kill"] = time.time()
    replacement = job_worker("jobs-restarted", logs, env).start()
    workers.append(replacement)
    print(f"t={0:5.1f} s  SIGKILLed {victim.name}, running shard 0; started {replacement.name}", flush=True)

    # 2. Redis stopped and started again
    await asyncio.sleep(3)
    times["redis_down"] = time.time()
    await asyncio.to_thread(redis.stop)
    await asyncio.sleep(args.redis_down)
    redis.start()
    await asyncio.to_thread(wait_port, redis.port)
    times["redis_back"] = time.time()
    print(f"t={times['redis_down'] - times['kill']:5.1f} s  Redis down for {args.redis_down:g} s", flush=True)

    # 3. the ASGI server restarted
    await asyncio.sleep(5)
    times["asgi_down"] = time.time()
    await asyncio.to_thread(asgi.stop)
    asgi.start()
    await asyncio.to_thread(wait_port, http_port)
    times["asgi_back"] = time.time()
    print(
        f"t={times['asgi_down'] - times['kill']:5.1f} s  ASGI server restarted "
        f"({times['asgi_back'] - times['asgi_down']:.1f} s without one)",
        flush=True,
    )

    while (await sync_to_async(Job.objects.get)(pk=job.pk)).is_active:
        if time.time() - times["kill"] > 600:
            break
        await asyncio.sleep(0.5)
    times["job_end"] = time.time()
    times["alive"] = [w.name for w in workers if w.process.poll() is None]
    print(f"t={times['job_end'] - times['kill']:5.1f} s  job over", flush=True)
    await asyncio.wait(tasks, timeout=60)
    for task in tasks:
        task.cancel()
    return job, watchers, times


def report(args, job, watchers, times) -> None:
    from apps.jobs.models import JobEvent, JobStep

    job.refresh_from_db()
    stored = set(JobEvent.objects.filter(job=job).values_list("seq", flat=True))
    lost_event = JobEvent.objects.filter(job=job, message__startswith="worker lost").order_by("seq").first()
    detect = lost_event.created.timestamp() - times["kill"] if lost_event else None
    back = times["redis_back"]
    after_redis = [min((t for t in w.live.values() if t >= back), default=None) for w in watchers]
    first_live = min((t for t in after_redis if t is not None), default=None)
    last_live = max((t for t in after_redis if t is not None), default=None)
    progress = (
        JobStep.objects.filter(job=job, finished__gte=_aware(back))
        .order_by("finished")
        .values_list("finished", flat=True)
    ).first()
    after_asgi = [min((t for t in w.live.values() if t >= times["asgi_back"]), default=None) for w in watchers]
    cells = JobStep.objects.filter(job=job, status="succeeded").count()
    reran = job.shards.filter(index=0).values_list("worker", flat=True).first() or "-"
    print(
        f"job {job.status} ({job.summary or '-'}): {cells}/{args.nodes * args.steps} cells succeeded, "
        f"{len(stored)} events stored (seq 1..{job.last_seq})"
    )
    print("client  delivered    live   REST  lost  dup  connects  refused")
    total_lost = 0
    for w in watchers:
        seen = set(w.live) | set(w.refilled)
        lost = len(stored - seen)
        total_lost += lost
        print(
            f"{w.index:>6}  {len(seen & stored):>9}  {len(w.live):>6}  {len(w.refilled):>5}  {lost:>4}  "
            f"{w.duplicates:>3}  {w.connects:>8}  {','.join(map(str, sorted(set(w.refusals)))) or '-'}"
        )

    def seconds(t, since):
        return f"{t - since:.1f} s" if t is not None else "never"

    print(
        f"lost events: {total_lost} (target 0: {'met' if total_lost == 0 else 'NOT met'})\n"
        f"worker loss surfaced: {seconds(detect + times['kill'] if detect is not None else None, times['kill'])} "
        f"after the SIGKILL (target <= 30 s: {'met' if detect is not None and detect <= 30 else 'NOT met'})\n"
        f"Redis back -> first event pushed live: {seconds(first_live, back)}, every client live again: "
        f"{seconds(last_live if None not in after_redis else None, back)}, first job progress: "
        f"{seconds(progress.timestamp() if progress else None, back)}\n"
        f"ASGI back -> every client live again: "
        f"{seconds(max(after_asgi) if None not in after_asgi else None, times['asgi_back'])}\n"
        f"job finished: {'yes' if job.is_terminal else 'NO'} ({job.status}), "
        f"{seconds(times['job_end'], times['kill'])} after the SIGKILL; shard 0 re-run by {reran.split('@')[0]} "
        f"(re-queued {'after' if detect is not None and detect + times['kill'] > back else 'before'} the Redis "
        f"restart); job workers alive at the end: {', '.join(times['alive']) or 'none'}"
    )


def _aware(timestamp: float):
    from datetime import UTC, datetime

    return datetime.fromtimestamp(timestamp, tz=UTC)


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
