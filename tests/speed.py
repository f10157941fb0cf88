"""Where the suite departs from production to be fast, each with why. Installed by tests/conftest.py before any test
runs; nothing here changes what a test can observe of the portal.

- Passwords are hashed with PBKDF2 at 1,000 iterations, not Django's 1,000,000 (~0.23 s of CPU for each user a fixture
  makes). The hash names its own iteration count, so a live server on the default hashers still checks it.
- A transactional test's teardown empties the tables that have rows with DELETE, in one transaction, and keeps the
  content types and permissions: Django's flush truncates every table (~160; PostgreSQL makes and unlinks files for
  each) and then re-creates the content types and permissions it truncated, ~0.8 s a test, ~500 tests."""

from django.conf import settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connections, transaction
from django.test import TransactionTestCase

# Filled once by the migrations and never written by the portal: emptying them would only have them re-created.
KEPT_TABLES = frozenset({"django_migrations", "django_content_type", "auth_permission"})


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1_000


def install() -> None:
    settings.PASSWORD_HASHERS = ["tests.speed.QuickPBKDF2PasswordHasher", *settings.PASSWORD_HASHERS]
    TransactionTestCase._fixture_teardown = _empty_the_tables


def _empty_the_tables(test_case: TransactionTestCase) -> None:
    for alias in test_case._databases_names(include_mirrors=False):
        empty_the_tables(alias)


_tables_of: dict[str, list[str]] = {}


def empty_the_tables(alias: str) -> None:
    """Every row of every table but KEPT_TABLES deleted. Django's foreign keys are deferred to the commit (both
    vendors), by when every row referring to a deleted one is deleted too, so the order does not matter."""
    connection = connections[alias]
    if alias not in _tables_of:
        names = connection.introspection.django_table_names(only_existing=True, include_views=False)
        _tables_of[alias] = sorted(set(names) - KEPT_TABLES)
    quote = connection.ops.quote_name
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        # One query says which tables have a row (most have none after a test).
        cursor.execute(
            " UNION ALL ".join(
                f"SELECT {index} WHERE EXISTS (SELECT 1 FROM {quote(name)})"
                for index, name in enumerate(_tables_of[alias])
            )
        )
        for (index,) in cursor.fetchall():
            cursor.execute(f"DELETE FROM {quote(_tables_of[alias][index])}")
