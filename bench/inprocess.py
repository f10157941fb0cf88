"""What the benches that time requests in their own process share: a throwaway database of the bench's own, and the
timing loop (Django's test client, so the figures are the application's, without an HTTP server in front)."""

import os
import statistics
import time
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parent.parent


class BenchDatabase:
    """Points DATABASE_URL at a database of the bench's own before Django starts, and removes it afterwards: a SQLite
    file under var/bench/ by default or, when DATABASE_URL names a PostgreSQL server, a database on that server.
    With keep, the database stays; with reuse too, a later run starts from it (`reused` says whether it did)."""

    def __init__(self, name: str, keep: bool = False, reuse: bool = False):
        self.name, self.keep, self.reuse = name, keep, reuse and keep
        self.server_url = os.environ.get("DATABASE_URL", "")
        self.postgres = urlparse(self.server_url).scheme in {"postgres", "postgresql", "pgsql"}
        self.reused = False

    def __enter__(self) -> "BenchDatabase":
        if self.postgres:
            parsed = urlparse(self.server_url)
            self.database = f"{parsed.path.lstrip('/') or 'rackpilot'}_{self.name}"
            self.maintenance_url = urlunparse(parsed._replace(path="/postgres"))
            self.reused = (
                bool(self._admin(f"SELECT 1 FROM pg_database WHERE datname = '{self.database}'")) and self.keep
            )
            if not self.reused:
                self._admin(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')
                self._admin(f'CREATE DATABASE "{self.database}"')
            os.environ["DATABASE_URL"] = urlunparse(parsed._replace(path=f"/{self.database}"))
            self.label = f"PostgreSQL database {self.database} on {parsed.hostname}"
        else:
            self.path = ROOT / "var" / "bench" / f"{self.name}.sqlite3"
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.reused = self.path.exists() and self.reuse
            if not self.reused:
                self._remove_sqlite()
            os.environ["DATABASE_URL"] = f"sqlite:///{self.path}"
            self.label = f"SQLite {self.path.relative_to(ROOT)}"
        return self

    def __exit__(self, *exc) -> None:
        from django.db import connections

        connections.close_all()
        if self.keep:
            return
        if self.postgres:
            self._admin(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')
        else:
            self._remove_sqlite()

    def _admin(self, sql: str):
        import psycopg

        with psycopg.connect(self.maintenance_url, autocommit=True) as conn:
            cursor = conn.execute(sql)
            return cursor.fetchone() if cursor.description else None

    def _remove_sqlite(self) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)


def analyze() -> None:
    """Fresh statistics for the planner and the tables vacuumed, as any database that has been running a while has
    (autovacuum's work: a PostgreSQL with it off, as this machine kind's is, keeps the demo's rewritten rows as dead
    ones with no visibility map, so a count that an index answers alone reads the whole table instead)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")


def time_get(client, path: str, requests: int, warmup: int, statuses: tuple[int, ...] = (200,)) -> dict:
    """GET path warmup times untimed, then requests times: wall-time p50/p95/max and median CPU ms of this process,
    the queries and bytes of one more request (counted apart: capturing queries costs time the timed ones should not
    pay), and that response for the caller to look into. Any status but `statuses` stops the bench."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    first = None  # the first request's wall ms: what a page costs before anything it asks is kept
    for _ in range(warmup):
        started = time.perf_counter()
        client.get(path)
        first = (time.perf_counter() - started) * 1000 if first is None else first
    timings, cpu = [], []
    for _ in range(requests):
        started, cpu_started = time.perf_counter(), time.process_time()
        response = client.get(path)
        timings.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - cpu_started) * 1000)
        if response.status_code not in statuses:
            raise SystemExit(f"{path}: HTTP {response.status_code}: {response.content[:300]!r}")
    with CaptureQueriesContext(connection) as queries:
        response = client.get(path)
    cuts = statistics.quantiles(timings, n=100, method="inclusive") if len(timings) > 1 else timings * 100
    return {
        "p50": cuts[49],
        "p95": cuts[94],
        "max": max(timings),
        "first": first,
        "cpu": statistics.median(cpu),
        "queries": len(queries),
        "bytes": len(response.content),
        "response": response,
    }


def machine_line() -> str:
    return (
        f"(machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}: other work there shows in the tail)"
    )
