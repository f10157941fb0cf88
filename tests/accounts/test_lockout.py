"""Sign-in lockout (issue 27, drills 4: 200 wrong passwords in 117 s, then the right one signed in): failures per
account name and per address within the window lock sign-in, the right password included, with a message saying so;
locks and lifts are audited; an admin lifts a lock early. The tests set the clock the code reads."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from apps.accounts.models import SignInLock, SignInScope
from apps.core.choices import AuditAction
from apps.core.models import AuditEntry
from tests import factories

pytestmark = pytest.mark.django_db
PASSWORD = "correct-horse-battery"
START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def clock(monkeypatch, settings):
    settings.RACKPILOT_SIGNIN_MAX_FAILURES = 5
    settings.RACKPILOT_SIGNIN_MAX_FAILURES_PER_ADDRESS = 20
    settings.RACKPILOT_SIGNIN_WINDOW_SECONDS = 900
    settings.RACKPILOT_SIGNIN_LOCKOUT_SECONDS = 900
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # hundreds of tries, quickly
    now = {"t": START}
    monkeypatch.setattr(timezone, "now", lambda: now["t"])

    def advance(seconds: float) -> None:
        now["t"] += timedelta(seconds=seconds)

    return advance


@pytest.fixture
def alice(clock):
    return factories.make_user(role="operator", username="alice")


def _sign_in(username: str, password: str, address: str = "198.51.100.7"):
    client = Client(REMOTE_ADDR=address)
    response = client.post("/login/", {"username": username, "password": password})
    return response, client


def _signed_in(client) -> bool:
    return "_auth_user_id" in client.session


def test_wrong_passwords_lock_the_account_and_the_right_one_is_then_refused(clock, alice):
    for _ in range(5):
        response, client = _sign_in("alice", "wrong")
        assert not _signed_in(client)
        clock(20)
    assert "locked until" in response.content.decode()  # the fifth failure says so already
    response, client = _sign_in("alice", PASSWORD)
    assert not _signed_in(client)
    body = response.content.decode()
    assert "Too many failed sign-ins for this account" in body and "ask an admin" in body
    lock = SignInLock.objects.get()
    assert (lock.scope, lock.key, lock.failures) == (SignInScope.ACCOUNT, "alice", 5)
    locked = AuditEntry.objects.get(action=AuditAction.LOCK)
    assert "alice" in locked.object_repr and locked.changes["failures"] == [None, 5]

    clock(901)  # the lock ends by itself
    response, client = _sign_in("alice", PASSWORD)
    assert _signed_in(client)


def test_failures_outside_the_window_do_not_add_up(clock, alice):
    for _ in range(4):
        _sign_in("alice", "wrong")
        clock(300)  # 4 failures 300 s apart: never 5 within 900 s
    _sign_in("alice", "wrong")
    assert not SignInLock.objects.exists()
    _, client = _sign_in("alice", PASSWORD)
    assert _signed_in(client)


def test_a_good_sign_in_clears_the_accounts_count(clock, alice):
    for _ in range(4):
        _sign_in("alice", "wrong")
    assert _signed_in(_sign_in("alice", PASSWORD)[1])
    for _ in range(4):
        _sign_in("alice", "wrong")
    assert not SignInLock.objects.exists()


def test_one_address_trying_many_names_is_locked(clock, alice):
    for number in range(20):
        _sign_in(f"guess{number}", "wrong", address="203.0.113.9")
    response, client = _sign_in("alice", PASSWORD, address="203.0.113.9")
    assert not _signed_in(client) and "for your address" in response.content.decode()
    assert _signed_in(_sign_in("alice", PASSWORD, address="198.51.100.7")[1])  # another address is not locked


def test_tries_during_a_lock_do_not_extend_it(clock, alice):
    for _ in range(5):
        _sign_in("alice", "wrong")
    for _ in range(50):
        clock(10)
        _sign_in("alice", "wrong")
    clock(401)  # 900 s after the lock began
    assert _signed_in(_sign_in("alice", PASSWORD)[1])
    assert SignInLock.objects.count() == 1


def test_the_admin_lifts_a_lock_and_it_is_audited(clock, alice, client):
    for _ in range(5):
        _sign_in("alice", "wrong")
    admin = factories.make_user(role="admin", username="root-admin")
    admin.is_staff = admin.is_superuser = True
    admin.save()
    client.force_login(admin)
    lock = SignInLock.objects.get()
    answer = client.post(
        "/admin/accounts/signinlock/", {"action": "lift_locks", "_selected_action": [lock.pk]}, follow=True
    )
    assert answer.status_code == 200 and "1 sign-in lock lifted" in answer.content.decode()
    lifted = AuditEntry.objects.get(action=AuditAction.UNLOCK)
    assert lifted.actor == admin and "alice" in lifted.object_repr
    assert _signed_in(_sign_in("alice", PASSWORD)[1])


def test_the_command_lists_and_lifts_locks(clock, alice, capsys):
    for _ in range(5):
        _sign_in("alice", "wrong")
    call_command("signin_unlock", "--list")
    assert "account\talice" in capsys.readouterr().out
    call_command("signin_unlock", "alice")
    assert "alice: 1 lock lifted" in capsys.readouterr().out
    assert AuditEntry.objects.filter(action=AuditAction.UNLOCK).count() == 1
    assert _signed_in(_sign_in("alice", PASSWORD)[1])


def test_the_admin_login_is_locked_too(clock, alice):
    alice.is_staff = True
    alice.save()
    for _ in range(5):
        _sign_in("alice", "wrong")
    client = Client(REMOTE_ADDR="198.51.100.7")
    client.post("/admin/login/", {"username": "alice", "password": PASSWORD})
    assert not _signed_in(client)
