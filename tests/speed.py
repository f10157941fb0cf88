"""Where the suite departs from production to be fast, each with why. Installed by tests/conftest.py before any test
runs; nothing here changes what a test can observe of the portal.

- Passwords are hashed with PBKDF2 at 1,000 iterations, not Django's 1,000,000 (~0.23 s of CPU for each user a fixture
  makes). The hash names its own iteration count, so a live server on the default hashers still checks it.
- A transactional test's teardown empties the tables that have rows with DELETE, in one transaction, and keeps the
  content types and permissions: Django's flush truncates every table (~120; PostgreSQL makes and unlinks files for
  each) and then re-creates the content types and permissions it truncated, ~0.8 s a test, ~500 tests.
  Then it puts back the rows the data migrations shipped, which Django's flush leaves out: every test starts from the
  database as migrated, whichever tests ran before it on its worker.
- Under pytest-xdist on PostgreSQL the migrations run once a session, not once a worker (~20 s each, ~50 s on a
  loaded machine): the first worker migrates a template database and each copies it (CREATE DATABASE ... TEMPLATE).
- On PostgreSQL the demo cluster (`demo_cluster`, ~1,000 tests) is built once a process and copied back in after
  that (COPY, ~0.05 s against ~0.35 s): the same rows with the same ids, the SKUs they name synced for real (their
  ids re-read: a flush gives them new ones), their timestamps the moment of the copy, and what the build left to run
  at its commit (recording the topology, Prometheus's targets) left to run at this one's. The ids and timestamps are
  written into the copied rows, not updated after: nothing vacuums a test database (autovacuum may be off, as on
  this machine), so every rolled-back version stays in the tables for the run, and scanning them grew dearer with each
  test (an emptiness check is asked of the primary key's index for the same reason). A demo-heavy set of 342 tests
  took 98–104 s, now 84–85."""

import fcntl
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.core import serializers
from django.core.management import call_command
from django.db import connection, connections, models, transaction
from django.db.backends.postgresql.creation import DatabaseCreation
from django.test import TransactionTestCase
from django.utils import timezone

from apps.inventory.catalogue import sync_gpu_skus
from apps.inventory.demo import DEMO, load_cluster
from apps.inventory.models import GpuSku

# Filled once by the migrations and never written by the portal: emptying them would only have them re-created.
KEPT_TABLES = frozenset({"django_migrations", "django_content_type", "auth_permission"})


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1_000


def install() -> None:
    settings.PASSWORD_HASHERS = ["tests.speed.QuickPBKDF2PasswordHasher", *settings.PASSWORD_HASHERS]
    TransactionTestCase._fixture_teardown = _empty_the_tables
    if os.environ.get("PYTEST_XDIST_TESTRUNUID"):
        DatabaseCreation._create_test_db = _copy_the_migrated_template


def uninstall(config) -> None:
    """The session's template database goes with it: at the end of the xdist controller, after every worker's."""
    if not getattr(config.option, "numprocesses", None) or connection.vendor != "postgresql":
        return
    template = _template_name(connection.creation)
    with connection.creation._nodb_cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {connection.ops.quote_name(template)}")
    for marker in Path(tempfile.gettempdir()).glob(f"rackpilot-*-{template}*"):
        marker.unlink(missing_ok=True)


# --- one migrated database a session, copied by each worker ---------------------------------------------------------

_migrate_each = DatabaseCreation._create_test_db


def _template_name(creation) -> str:
    return creation._get_test_db_name().rsplit("_gw", 1)[0] + "_template"


def _copy_the_migrated_template(creation, verbosity, autoclobber, keepdb=False):
    """The worker's test database as a copy of the session's migrated template; Django's migrate that follows finds
    nothing to do. With --reuse-db (keepdb) the worker keeps its own, as pytest-django does."""
    if keepdb:
        return _migrate_each(creation, verbosity, autoclobber, keepdb)
    name, template = creation._get_test_db_name(), _template_name(creation)
    quote = creation.connection.ops.quote_name
    session = os.environ["PYTEST_XDIST_TESTRUNUID"]
    made = Path(tempfile.gettempdir()) / f"rackpilot-{session}-{template}"
    with open(f"{made}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other workers wait for the first one's migrations
        if not made.exists():
            _migrate_the_template(creation, template)
            made.touch()
        with creation._nodb_cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {quote(name)}")
            cursor.execute(f"CREATE DATABASE {quote(name)} TEMPLATE {quote(template)}")
    return name


def _migrate_the_template(creation, template: str) -> None:
    db = creation.connection
    with creation._nodb_cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {db.ops.quote_name(template)}")
        cursor.execute(f"CREATE DATABASE {db.ops.quote_name(template)}")
    db.close()
    kept, db.settings_dict["NAME"] = db.settings_dict["NAME"], template
    try:
        call_command("migrate", verbosity=0, interactive=False, database=db.alias, run_syncdb=True)
    finally:
        db.close()  # a template takes no copy while a session is connected to it
        db.settings_dict["NAME"] = kept


def _empty_the_tables(test_case: TransactionTestCase) -> None:
    for alias in test_case._databases_names(include_mirrors=False):
        empty_the_tables(alias)
        _put_back_the_shipped_rows(alias)


# What the data migrations shipped (the GPU SKU catalogue, acceptance criteria, benchmark references, remediation and
# cost policies), as the test database held it before any test ran: put back after each transactional test's
# emptying. Django's flush leaves those tables empty, and pytest-xdist's work stealing can hand a worker plain tests
# after its transactional ones: a test that reads a shipped row then failed or passed by the order tests ran in.
_shipped: dict[str, str] = {}


def remember_the_shipped_rows(alias: str = "default") -> None:
    """Called once the worker's test database is migrated, before any test (tests/conftest.py)."""
    db = connections[alias]
    filled = set(tables_with_rows(db, _tables(db)))
    shipped = [model for model in apps.get_models() if model._meta.db_table in filled and not model._meta.proxy]
    rows = (row for model in shipped for row in model._base_manager.using(alias).order_by("pk"))
    _shipped[alias] = serializers.serialize("json", rows)


def _put_back_the_shipped_rows(alias: str) -> None:
    if not _shipped.get(alias):
        return
    db = connections[alias]
    with transaction.atomic(using=alias), db.constraint_checks_disabled():
        for row in serializers.deserialize("json", _shipped[alias], using=alias):
            row.save(using=alias)


def empty_the_tables(alias: str) -> None:
    """Every row of every table but KEPT_TABLES deleted. Django's foreign keys are deferred to the commit (both
    vendors), by when every row referring to a deleted one is deleted too, so the order does not matter."""
    db = connections[alias]
    quote = db.ops.quote_name
    with transaction.atomic(using=alias), db.cursor() as cursor:
        for name in tables_with_rows(db, _tables(db)):
            cursor.execute(f"DELETE FROM {quote(name)}")


def _tables(db) -> list[str]:
    names = db.introspection.django_table_names(only_existing=True, include_views=False)
    return sorted(set(names) - KEPT_TABLES)


def tables_with_rows(db, names: list[str]) -> list[str]:
    """Which of the tables have a row, in one query. Each asks its primary key's index for a first row, not EXISTS:
    that scans the table, and a test database's tables fill with the dead rows of rolled-back tests (nothing vacuums
    it), where the index's entries for them are marked dead the first time they are passed."""
    quote = db.ops.quote_name
    key = {model._meta.db_table: model._meta.pk.column for model in apps.get_models(include_auto_created=True)}
    with db.cursor() as cursor:
        cursor.execute(
            " UNION ALL ".join(
                f"SELECT {index} FROM (SELECT 1 FROM {quote(name)} ORDER BY {quote(key[name])} LIMIT 1) AS first{index}"
                for index, name in enumerate(names)
            )
        )
        return [names[index] for (index,) in cursor.fetchall()]


# --- the demo cluster, built once a process -------------------------------------------------------------------------


@dataclass
class _Table:
    name: str
    columns: str  # the quoted column list COPY wrote the rows in
    rows: bytes  # COPY's text format: one line a row, tab-separated columns
    sku_columns: list[int]  # the columns naming a GpuSku (by id)
    stamped: list[int]  # the auto_now / auto_now_add columns


@dataclass
class _DemoCopy:
    tables: list[_Table]
    sku_names: dict[str, str]  # SKU id, as COPY writes it -> name
    on_commit: list  # the build's transaction.on_commit entries


_demo_copy: _DemoCopy | None = None


def load_demo() -> None:
    """The demo cluster, as `load_cluster(DEMO)` builds it. The first build of a process is copied and later ones
    copy it back, where the tables it filled are empty again (as after a rolled-back or flushed test)."""
    global _demo_copy
    if connection.vendor != "postgresql":
        load_cluster(DEMO)
        return
    with transaction.atomic():
        sync_gpu_skus(GpuSku)
        if _demo_copy is not None and not tables_with_rows(connection, [t.name for t in _demo_copy.tables]):
            _copy_back(_demo_copy)
            return
        tables = _tables(connection)
        empty = set(tables) - set(tables_with_rows(connection, tables))
        pending = len(connection.run_on_commit)
        load_cluster(DEMO)
        filled = tables_with_rows(connection, sorted(empty))
        copy = _copy_of(filled, connection.run_on_commit[pending:])
        if _demo_copy is None and copy is not None:
            _demo_copy = copy


def _copy_of(names: list[str], on_commit: list) -> _DemoCopy | None:
    """None where a filled table refers to a row the build did not make (but a SKU's): a copy would not stand alone."""
    model_of = {model._meta.db_table: model for model in apps.get_models(include_auto_created=True)}
    tables = []
    for name in names:
        model = model_of[name]
        columns = [field.column for field in model._meta.concrete_fields]
        sku_columns = []
        for index, field in enumerate(model._meta.concrete_fields):
            if isinstance(field, models.ForeignKey):
                target = field.related_model._meta.db_table
                if target == GpuSku._meta.db_table:
                    sku_columns.append(index)
                elif target not in names and _any_set(name, field.column):
                    return None
        stamped = [
            index
            for index, field in enumerate(model._meta.concrete_fields)
            if isinstance(field, models.DateTimeField) and (field.auto_now or field.auto_now_add)
        ]
        column_list = ", ".join(connection.ops.quote_name(column) for column in columns)
        copy_out = f"COPY {connection.ops.quote_name(name)} ({column_list}) TO STDOUT"
        with connection.cursor() as cursor, cursor.cursor.copy(copy_out) as out:
            rows = b"".join(bytes(block) for block in out)
        tables.append(_Table(name, column_list, rows, sku_columns, stamped))
    sku_names = {str(pk): name for pk, name in GpuSku.objects.values_list("pk", "name")}
    return _DemoCopy(tables, sku_names, list(on_commit))


def _any_set(table: str, column: str) -> bool:
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {quote(table)} WHERE {quote(column)} IS NOT NULL)")
        return cursor.fetchone()[0]


def _copy_back(copy: _DemoCopy) -> None:
    ids = {name: str(pk) for pk, name in GpuSku.objects.values_list("pk", "name")}
    skus = {copied: ids[name] for copied, name in copy.sku_names.items()}  # the SKU ids in the copy -> now
    now = timezone.now().isoformat(sep=" ")  # what auto_now reads: a test's clock where it set one
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        for table in copy.tables:
            rows = table.rows
            if table.sku_columns or table.stamped:
                rows = _rewritten(rows, table, skus, now)
            with cursor.cursor.copy(f"COPY {quote(table.name)} ({table.columns}) FROM STDIN") as into:
                into.write(rows)
    for _, callback, robust in copy.on_commit:
        transaction.on_commit(callback, robust=robust)


def _rewritten(rows: bytes, table: _Table, skus: dict[str, str], now: str) -> bytes:
    """The rows stamped `now` (as an UPDATE after the copy would, at the cost of a second version of every row: the
    dead rows of rolled-back copies pile up in the tables the whole run, as nothing vacuums a test database) and each
    SKU id rewritten to the id the SKU of that name has now (a flush gave it a new one)."""
    lines = []
    for line in rows.decode().removesuffix("\n").split("\n"):  # COPY escapes a newline inside a value
        values = line.split("\t")
        for index in table.sku_columns:
            if values[index] != "\\N":
                values[index] = skus[values[index]]
        for index in table.stamped:
            values[index] = now
        lines.append("\t".join(values))
    return ("\n".join(lines) + "\n").encode()
