"""Fixtures shared by every test: users of each role, API and browser clients for them, the demo cluster, a GB200
NVL72 rack's trays and a coolant leak in one."""

import datetime as dt
import shutil
import warnings

import pytest
from django.conf import settings
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts.choices import Role
from apps.health import services as health
from apps.health.choices import Severity, Source
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import LeakSensor, Node
from apps.tokens.models import ApiToken
from apps.tokens.services import digest_of
from tests import factories, speed
from tests.live_server import live_server_env, live_server_url  # noqa: F401  (fixtures for tests that need a server)
from tests.pages import PageClient
from tests.workers import worker_name


def pytest_collection_modifyitems(config, items):
    """Tests marked `postgresql` test what only PostgreSQL has (several processes on one database, its connection
    count): CI runs them in its PostgreSQL pass, and the SQLite pass leaves them out (deselected, not skipped)."""
    from django.db import connection

    if connection.vendor == "postgresql":
        return
    chosen = [item for item in items if not item.get_closest_marker("postgresql")]
    if len(chosen) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item.get_closest_marker("postgresql")])
        items[:] = chosen


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test that ran a live server carries the end of that server's log (what its worker did), so a failure
    in CI can be read without rerunning it."""
    report = yield
    log = getattr(item, "live_server_log", None)
    if report.failed and log is not None and log.exists():
        lines = log.read_text(errors="replace").splitlines()
        report.sections.append(("live server log (last 200 lines)", "\n".join(lines[-200:])))
    return report


def pytest_configure(config):
    """The suite's shortcuts (tests/speed.py). Under pytest-xdist the workers share the services wiring's Redis: give
    each its own cache keys and channel groups (the jobs list group is one name for every job), before anything opens
    them."""
    speed.install()
    worker = worker_name()
    if not worker:
        return
    settings.CACHES["default"]["KEY_PREFIX"] = worker
    layer = settings.CHANNEL_LAYERS["default"]
    if "CONFIG" in layer:
        layer["CONFIG"]["prefix"] = f"asgi-{worker}"


def pytest_unconfigure(config):
    """The session's own var dir (portal/settings.py) goes with it; xdist workers inherit it and leave it be. So does
    its template database (tests/speed.py)."""
    from pytest_django.plugin import blocking_manager_key

    with config.stash[blocking_manager_key].unblock():
        speed.uninstall(config)
    if settings.VAR_DIR_TEMPORARY:
        shutil.rmtree(settings.VAR_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's, and before it drops the test database: connections still open on it (a stopped server's
    backend not yet gone on a loaded machine, a thread's own connection) are named in a warning and ended, where the
    drop would fail with "being accessed by other users" and leave the database behind. And first, what the data
    migrations shipped is remembered, for each transactional test's teardown to put back (tests/speed.py)."""
    with django_db_blocker.unblock():
        speed.remember_the_shipped_rows()
    yield
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    others = "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(f"SELECT pid, backend_start, state, left(query, 160) {others}")
        strays = cursor.fetchall()
        if strays:
            cursor.execute(f"SELECT pg_terminate_backend(pid) {others}")
            warnings.warn(f"connections left open on the test database, ended: {strays}", stacklevel=1)


@pytest.fixture
def make_user(db):
    def make(role: str = Role.VIEWER, username: str | None = None):
        return factories.make_user(role=role, username=username)

    return make


@pytest.fixture
def viewer(make_user):
    return make_user(Role.VIEWER, "viewer")


@pytest.fixture
def operator(make_user):
    return make_user(Role.OPERATOR, "operator")


@pytest.fixture
def admin(make_user):
    return make_user(Role.ADMIN, "admin")


@pytest.fixture
def api_client():
    """An anonymous API client."""
    return APIClient()


@pytest.fixture
def api_as():
    """api_as(user) -> an APIClient that sends the user's API token, as automation would."""

    def make(user) -> APIClient:
        secret = factories.make_token(user)
        # As a token in use is: its once-a-minute "last used" write (tests/tokens) stays out of pinned query counts.
        ApiToken.objects.filter(digest=digest_of(secret)).update(last_used=timezone.now())
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
        return client

    return make


@pytest.fixture
def client():
    """Django's test client, checking every HTML page it receives for repeated ids (tests/pages.py)."""
    return PageClient()


@pytest.fixture
def browser_as(client):
    """browser_as(user) -> the test client logged in as the user (session, CSRF checks on)."""

    def make(user):
        client.force_login(user)
        return client

    return make


@pytest.fixture
def demo_cluster(db):
    from apps.inventory.demo import DEMO

    speed.load_demo()
    return DEMO


@pytest.fixture
def nvl72_trays(db) -> list:
    """A small demo cluster with one GB200 NVL72 rack (nvl01, its coolant loop nvl01-loop): the rack's 18 compute
    trays by slot, each with its BMC settings for the simulated BMCs (Redfish). Request `clock` first to stamp it."""
    load_cluster(ClusterShape(compute_nodes=8, rack_scale_racks=1))
    trays = list(Node.objects.filter(nvlink_domain__isnull=False).order_by("tray_slot"))
    for tray in trays:
        factories.make_sim_bmc(tray)
    return trays


@pytest.fixture
def coolant_leak(nvl72_trays):
    """coolant_leak(tray=nvl01-t03, at=now) -> the open `coolant_leak` event its leak sensor reads, as the BMC poll
    records it (critical, on the sensor)."""

    def record(tray=None, *, at: dt.datetime | None = None):
        tray = tray or nvl72_trays[2]
        return health.record_event(
            component=health.Component.leak_sensor(LeakSensor.objects.get(node=tray), tray),
            source=Source.BMC_SENSORS,
            kind="coolant_leak",
            severity=Severity.CRITICAL,
            summary=f"Coolant leak: {tray.hostname}'s leak sensor reads a leak (Tray drip pan leak detector)",
            evidence={"reading": "leak", "threshold": "no leak"},
            at=at,
        )

    return record


class Clock:
    """The moment `django.utils.timezone.now` answers: the test moves it. Each reading moves it a microsecond on, so
    rows stamped one after another keep their order (`order_by("-created")`) as on a real clock."""

    START = dt.datetime(2026, 3, 2, 9, 30, tzinfo=dt.UTC)  # a Monday morning, the same on every run
    TICK = dt.timedelta(microseconds=1)

    def __init__(self):
        self.now = self.START

    def read(self) -> dt.datetime:
        moment = self.now
        self.now += self.TICK
        return moment

    def advance(self, **delta) -> dt.datetime:
        """advance(minutes=7): the clock moves on that far; returns the new moment."""
        self.now += dt.timedelta(**delta)
        return self.now


@pytest.fixture
def clock(monkeypatch):
    """The clock the code reads, set by the test: Django's `timezone.now`, which stamps the rows (auto_now), the
    services' default `now`, and the simulated cluster's clock (its training logs, apps/simulator/clock.py). Nothing
    the test asserts then depends on the hour it runs at or on how long it takes. Request it before fixtures that
    stamp rows (`pytest.mark.usefixtures("clock")` first), so they are stamped at the test's moment too."""
    moment = Clock()
    monkeypatch.setattr(timezone, "now", moment.read)
    return moment


@pytest.fixture
def run_shards():
    """run_shards(job) -> the job, after running each of its shards in this process, as a worker would."""
    from apps.jobs import executor

    def run(job):
        for shard in job.shards.order_by("index"):
            executor.run_shard(job_public_id=str(job.public_id), index=shard.index, worker="pytest")
        job.refresh_from_db()
        return job

    return run


@pytest.fixture
def shipped_references(db):
    """The shipped benchmark references (a transactional test's flush empties the table the migration filled)."""
    from apps.benchmarks.models import MeasurementReference, Reference
    from apps.benchmarks.references import sync_shipped, sync_shipped_measurements

    sync_shipped(Reference)
    sync_shipped_measurements(MeasurementReference)


@pytest.fixture
def on_the_simulator(settings):
    """Jobs a feature starts without naming a transport go to the simulator, in either wiring (the services wiring's
    default is ssh: real nodes)."""
    settings.RACKPILOT_JOB_DEFAULT_TRANSPORT = "sim"
    return settings


@pytest.fixture
def record_telemetry():
    """record_telemetry(until=None): the embedded wiring's telemetry record up to `until` (default: now, the moment
    the pages read by default; a test's `clock` sets it), as the periodic loop leaves it: the last hour's minutes and
    the backfill of the pages' windows."""
    from apps.monitoring import recorder

    def record(until: float | None = None) -> int:
        until = timezone.now().timestamp() if until is None else until
        return recorder.record_telemetry(until=until) + recorder.backfill(until=until)

    return record
