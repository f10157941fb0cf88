"""Event benchmark: events persisted per second, and emit -> websocket-client latency with many clients.

1. Persistence: a job's Recorder (the path every running shard uses) writes N events in batches; events/s.
2. Delivery: uvicorn serving the project (services wiring: Redis channel layer, the database), CLIENTS logged-in
   websocket clients on one job; this process emits RATE events/s through a Recorder (batched on flush, one
   message per flush). Every client must see every seq exactly once, in order; latency is from the emit call to
   the client's receipt.
Targets: >= 2,000 events/s persisted; at 200 events/s to 50 clients every event delivered, p99 <= 250 ms.
Usage: python bench/events.py [--rate 200] [--clients 50] [--seconds 15] [--persist 20000]
"""

import argparse
import asyncio
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--persist", type=int, default=20000)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/13")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="rackpilot-events-"))
    env = {
        "RACKPILOT_VAR_DIR": str(work),
        "REDIS_URL": args.redis,
        "RACKPILOT_SECRET_KEY": "events-bench",
        "RACKPILOT_LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "RACKPILOT_ALLOWED_HOSTS": "127.0.0.1,localhost",
    }
    os.environ.update(env)
    if not os.environ.get("DATABASE_URL"):
        os.environ["DATABASE_URL"] = f"sqlite:///{work / 'events.sqlite3'}"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    import redis

    redis.Redis.from_url(args.redis).flushdb()
    from django.contrib.auth import get_user_model
    from django.contrib.sessions.backends.db import SessionStore

    from apps.inventory.models import Node
    from apps.jobs import services
    from apps.jobs.events import Recorder

    services.enqueue = lambda job: None
    user = get_user_model().objects.create_user("bench", password="x" * 12, role="operator")
    Node.objects.create(hostname="bench-node")
    job = services.create_job(
        kind="sleep", targets=services.TargetSpec(nodes=("bench-node",)), parameters={"seconds": 0}, transport="local"
    )

    # 1. persistence
    recorder = Recorder(job, interval=0.2, max_batch=500).start()
    t = time.perf_counter()
    for i in range(args.persist):
        recorder.event(f"line {i} " + "x" * 100, hostname="bench-node", step="sleep-1")
    recorder.close()
    persisted = args.persist / (time.perf_counter() - t)
    job.refresh_from_db()
    print(
        f"persisted: {args.persist} events in batches at {persisted:,.0f} events/s "
        f"({os.environ['DATABASE_URL'].split(':')[0]}), last_seq={job.last_seq} (target >= 2,000/s)"
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
            "portal.asgi:application",
        ],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        start_seq = job.last_seq
        result = asyncio.run(deliver(args, port, session.session_key, job, start_seq))
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)
    total, latencies, missing, duplicates = result
    latencies.sort()

    def q(p):
        return 1e3 * latencies[min(len(latencies) - 1, int(p * len(latencies)))] if latencies else float("nan")

    print(
        f"delivered: {args.rate} events/s for {args.seconds} s to {args.clients} clients: {len(latencies)} of "
        f"{total * args.clients} received, missing={missing} duplicates={duplicates}, emit->client "
        f"p50={q(0.5):.1f} ms p99={q(0.99):.1f} ms max={1e3 * latencies[-1] if latencies else 0:.1f} ms "
        f"(target: none missing, p99 <= 250 ms)"
    )


async def deliver(args, port, session_key, job, start_seq):
    import websockets
    from asgiref.sync import sync_to_async

    from apps.jobs.events import Recorder

    n = args.rate * args.seconds
    last = start_seq + n
    seen = [dict() for _ in range(args.clients)]
    duplicates = [0] * args.clients
    sent_at: dict[int, float] = {}
    url = f"ws://127.0.0.1:{port}/ws/jobs/{job.public_id}/?after={start_seq}"

    async def client(i):
        async with websockets.connect(
            url,
            additional_headers=[("Cookie", f"sessionid={session_key}")],
            origin=f"http://127.0.0.1:{port}",
            max_queue=None,
        ) as ws:
            while True:
                try:
                    frame = json.loads(await asyncio.wait_for(ws.recv(), timeout=10))
                except (TimeoutError, websockets.ConnectionClosed):
                    return
                now = time.time()
                for event in frame.get("events", []):
                    if event["seq"] in seen[i]:
                        duplicates[i] += 1
                    seen[i][event["seq"]] = now
                if max(seen[i], default=0) >= last:
                    return

    tasks = [asyncio.create_task(client(i)) for i in range(args.clients)]
    await asyncio.sleep(2)

    def produce():
        recorder = Recorder(job, interval=0.1, max_batch=1000).start()
        t0 = time.perf_counter()
        for k in range(n):
            due = t0 + (k + 1) / args.rate
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            sent_at[start_seq + k + 1] = time.time()
            recorder.event(f"event {k} " + "x" * 100, hostname="bench-node", step="sleep-1")
        recorder.close()

    await sync_to_async(produce, thread_sensitive=False)()
    await asyncio.wait(tasks, timeout=30)
    latencies, missing = [], 0
    for got in seen:
        for seq in range(start_seq + 1, last + 1):
            if seq in got:
                latencies.append(got[seq] - sent_at[seq])
            else:
                missing += 1
    return n, latencies, missing, sum(duplicates)


if __name__ == "__main__":
    main()
