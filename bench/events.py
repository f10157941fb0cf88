"""Event benchmark: events persisted per second, and emit -> websocket-client latency with many clients.

1. Persistence: a job's Recorder (the path every running shard uses) writes N events in batches; events/s.
2. Delivery, set up as in production and as the floor in shared/rigs/events-floor.py was measured: uvicorn serving
   portal.asgi in its own process (services wiring: Redis channel layer, the database); a producer in another
   process, as a Celery worker would be, emitting RATE events/s through a Recorder with the engine's flush interval
   (RACKPILOT_EVENT_FLUSH_MS unless --flush-ms); CLIENTS logged-in websocket clients on the job in this process.
   Every client must see every seq exactly once; latency is from the emit call to the client's receipt (it includes
   the wait for the recorder's next flush), and, to compare with the floor, from the batch's commit to receipt.
The ASGI server runs as Makefile/compose run it (no per-message deflate; --deflate turns uvicorn's default on).
Targets: >= 2,000 events/s persisted; at 1,000 events/s to 200 clients every event delivered, p99 <= 250 ms.
Usage: python bench/events.py [--rate 1000] [--clients 200] [--seconds 15] [--persist 20000] [--flush-ms N]
       [--deflate]
"""

import argparse
import asyncio
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def quantiles(values: list[float]) -> str:
    values = sorted(values)
    if not values:
        return "p50=- p95=- p99=- max=-"

    def q(p):
        return 1e3 * values[min(len(values) - 1, int(p * len(values)))]

    return f"p50={q(0.5):.1f} ms p95={q(0.95):.1f} ms p99={q(0.99):.1f} ms max={1e3 * values[-1]:.1f} ms"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--persist", type=int, default=20000)
    parser.add_argument("--flush-ms", type=int, default=None, help="default: the engine's RACKPILOT_EVENT_FLUSH_MS")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--deflate", action="store_true", help="compress frames per client (uvicorn's default)")
    parser.add_argument("--produce", nargs=3, metavar=("JOB", "START_SEQ", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.produce:
        return produce(args)

    work = Path(tempfile.mkdtemp(prefix="rackpilot-events-"))
    env = {
        "RACKPILOT_VAR_DIR": str(work),
        "REDIS_URL": args.redis,
        "RACKPILOT_SECRET_KEY": "events-bench",
        "RACKPILOT_SECRETS_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode(),  # a Fernet key for this run
        "RACKPILOT_LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "RACKPILOT_ALLOWED_HOSTS": "127.0.0.1,localhost",
    }
    if args.flush_ms is not None:
        env["RACKPILOT_EVENT_FLUSH_MS"] = str(args.flush_ms)
    os.environ.update(env)
    if not os.environ.get("DATABASE_URL"):
        os.environ["DATABASE_URL"] = f"sqlite:///{work / 'events.sqlite3'}"
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from django.db import connection

    if connection.vendor == "sqlite":  # as the embedded wiring runs it (the mode is kept in the file)
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode=WAL")
    import redis

    redis.Redis.from_url(args.redis).flushdb()
    from django.contrib.auth import get_user_model
    from django.contrib.sessions.backends.db import SessionStore

    from apps.inventory.models import Node
    from apps.jobs import services
    from apps.jobs.events import Recorder

    services.enqueue = lambda job: None
    # Kept between runs on a PostgreSQL database (SQLite: a new file each run).
    user = get_user_model().objects.filter(username="bench").first()
    user = user or get_user_model().objects.create_user("bench", password="x" * 12, role="operator")
    Node.objects.get_or_create(hostname="bench-node")
    job = services.create_job(
        kind="sleep", targets=services.TargetSpec(nodes=("bench-node",)), parameters={"seconds": 0}, transport="local"
    )
    print(
        f"events bench: {os.cpu_count()} CPUs, database {os.environ['DATABASE_URL'].split(':')[0]}, Redis channel "
        f"layer, recorder flush every {settings.RACKPILOT_EVENT_FLUSH_MS} ms or 500 events; {load()}"
    )

    # 1. persistence
    recorder = Recorder(job, interval=settings.RACKPILOT_EVENT_FLUSH_MS / 1000, max_batch=500).start()
    t = time.perf_counter()
    for i in range(args.persist):
        recorder.event(f"line {i} " + "x" * 100, hostname="bench-node", step="sleep-1")
    recorder.close()
    persisted = args.persist / (time.perf_counter() - t)
    job.refresh_from_db()
    print(
        f"persisted: {args.persist} events in batches at {persisted:,.0f} events/s, last_seq={job.last_seq} "
        f"(target >= 2,000/s: {'met' if persisted >= 2000 else 'NOT met'})"
    )

    # 2. delivery
    session = SessionStore()
    session["_auth_user_id"] = str(user.pk)
    session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
    session["_auth_user_hash"] = user.get_session_auth_hash()
    session.create()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    child_env = dict(os.environ, PYTHONPATH=str(ROOT))
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
            *([] if args.deflate else ["--ws-per-message-deflate", "false"]),
            "portal.asgi:application",
        ],
        cwd=ROOT,
        env=child_env,
    )
    try:
        for _ in range(600):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if server.poll() is not None:
                    sys.exit("the ASGI server did not start")
                time.sleep(0.1)
        start_seq = job.last_seq
        result = asyncio.run(deliver(args, port, session.session_key, job, start_seq, work, child_env, server.pid))
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)
    total, emit_latency, push_latency, wait, missing, duplicates, out_of_order, producer_cpu, cpu = result
    server_cpu, own_cpu = cpu
    met = not missing and emit_latency and sorted(emit_latency)[int(0.99 * len(emit_latency))] <= 0.25
    print(
        f"delivered: {args.rate} events/s for {args.seconds} s to {args.clients} clients: {len(emit_latency)} of "
        f"{total * args.clients} received, missing={missing} duplicates={duplicates} out-of-order={out_of_order}\n"
        f"  emit -> client  : {quantiles(emit_latency)}  (target: none missing, p99 <= 250 ms: "
        f"{'met' if met else 'NOT met'})\n"
        f"  emit -> commit  : {quantiles(wait)}  (waiting for the recorder's flush, and its write)\n"
        f"  commit -> client: {quantiles(push_latency)}  (the floor's measure: batch formed -> received)\n"
        f"  CPU, first event to last receipt: server {server_cpu:.1f} s, producer {producer_cpu:.1f} s, "
        f"{args.clients} clients {own_cpu:.1f} s; {(server_cpu + producer_cpu + own_cpu) / args.seconds:.2f} cores "
        f"for {args.seconds} s (the machine's share decides the latency when others load it)\n"
        f"  ({load()})"
    )


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def produce(args):
    """The producer process: a Recorder as a running shard has one, emitting at the rate; times go to a file."""
    import django

    django.setup()
    from django.conf import settings

    from apps.jobs import events
    from apps.jobs.models import Job

    job_id, start_seq, out = args.produce
    job = Job.objects.get(public_id=job_id)
    start_seq = int(start_seq)
    n = args.rate * args.seconds
    sent: dict[int, float] = {}
    committed: list[tuple[int, float]] = []
    push = events.broadcast

    def timed_broadcast(job, *, events=(), **kwargs):  # called by the recorder right after each commit
        if events:
            committed.append((events[-1].seq, time.time()))
        return push(job, events=events, **kwargs)

    events.broadcast = timed_broadcast
    recorder = events.Recorder(job, interval=settings.RACKPILOT_EVENT_FLUSH_MS / 1000).start()
    cpu = time.process_time()
    t0 = time.perf_counter()
    for k in range(n):
        delay = t0 + (k + 1) / args.rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        sent[start_seq + k + 1] = time.time()
        recorder.event(f"event {k} " + "x" * 100, hostname="bench-node", step="sleep-1")
    recorder.close()
    cpu = time.process_time() - cpu
    Path(out).write_text(json.dumps({"sent": sent, "committed": committed, "cpu": cpu}))


async def deliver(args, port, session_key, job, start_seq, work, child_env, server_pid):
    import websockets

    n = args.rate * args.seconds
    last = start_seq + n
    seen = [dict() for _ in range(args.clients)]
    duplicates = [0] * args.clients
    out_of_order = [0] * args.clients
    ready = [0] * args.clients
    url = f"ws://127.0.0.1:{port}/ws/jobs/{job.public_id}/?after={start_seq}"

    async def client(i):
        async with websockets.connect(
            url,
            additional_headers=[("Cookie", f"sessionid={session_key}")],
            origin=f"http://127.0.0.1:{port}",
            max_queue=None,
            open_timeout=30,
        ) as ws:
            top = start_seq
            while True:
                try:
                    frame = json.loads(await asyncio.wait_for(ws.recv(), timeout=70))
                except (TimeoutError, websockets.ConnectionClosed):
                    return
                now = time.time()
                ready[i] = 1
                for event in frame.get("events", []):
                    seq = event["seq"]
                    if seq in seen[i]:
                        duplicates[i] += 1
                        continue
                    if seq != top + 1:
                        out_of_order[i] += 1
                    top = max(top, seq)
                    seen[i][seq] = now
                if top >= last:
                    return

    tasks = [asyncio.create_task(client(i)) for i in range(args.clients)]
    # The producer starts once every client has its first frame (200 handshakes take a while on 2 cores).
    deadline = time.monotonic() + 60
    while sum(ready) < args.clients and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)
    cpu = cpu_seconds(server_pid), time.process_time()
    times = work / "producer.json"
    producer = await asyncio.create_subprocess_exec(
        sys.executable,
        str(Path(__file__).resolve()),
        "--produce",
        str(job.public_id),
        str(start_seq),
        str(times),
        "--rate",
        str(args.rate),
        "--seconds",
        str(args.seconds),
        cwd=ROOT,
        env=child_env,
    )
    await producer.wait()
    await asyncio.wait(tasks, timeout=30)
    cpu = cpu_seconds(server_pid) - cpu[0], time.process_time() - cpu[1]
    record = json.loads(times.read_text())
    sent = {int(seq): t for seq, t in record["sent"].items()}
    committed, flushes = {}, sorted(record["committed"])
    previous = start_seq
    for top, t in flushes:
        for seq in range(previous + 1, top + 1):
            committed[seq] = t
        previous = top
    emit_latency, push_latency, missing = [], [], 0
    for got in seen:
        for seq in range(start_seq + 1, last + 1):
            if seq in got:
                emit_latency.append(got[seq] - sent[seq])
                push_latency.append(got[seq] - committed[seq])
            else:
                missing += 1
    wait = [committed[seq] - sent[seq] for seq in range(start_seq + 1, last + 1)]
    return n, emit_latency, push_latency, wait, missing, sum(duplicates), sum(out_of_order), record["cpu"], cpu


if __name__ == "__main__":
    main()
