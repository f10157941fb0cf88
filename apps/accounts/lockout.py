"""Sign-in lockout: after RACKPILOT_SIGNIN_MAX_FAILURES failed sign-ins for one account name, or
RACKPILOT_SIGNIN_MAX_FAILURES_PER_ADDRESS from one address, within RACKPILOT_SIGNIN_WINDOW_SECONDS, sign-in is refused
for that name or address for RACKPILOT_SIGNIN_LOCKOUT_SECONDS, the right password included (OWASP's authentication
advice: guessing must stop, not merely slow down). Locks and lifts are audited; an admin lifts one early in the admin
or with `manage.py signin_unlock`. API tokens are not passwords and are not counted here.

Every path that checks a password goes through LockingModelBackend (the sign-in page, the admin's login), so a lock
holds everywhere; the sign-in form says why it refused (SignInForm)."""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.accounts.models import SignInFailure, SignInLock, SignInScope
from apps.core import audit
from apps.core.choices import AuditAction

KEY_LENGTH = 150


def client_address(request) -> str:
    """The address a request came from (REMOTE_ADDR: the proxy in front sets it, e.g. uvicorn --proxy-headers)."""
    return (request.META.get("REMOTE_ADDR", "") if request is not None else "")[:KEY_LENGTH]


def _keys(*, username: str, address: str) -> list[tuple[str, str]]:
    keys = [(SignInScope.ACCOUNT, username[:KEY_LENGTH])] if username else []
    return keys + ([(SignInScope.ADDRESS, address)] if address else [])


def active_lock(*, username: str, address: str, now: datetime | None = None) -> SignInLock | None:
    """The lock that refuses this sign-in now (the one that lasts longest), or None."""
    now = now or timezone.now()
    locks = [
        lock
        for scope, key in _keys(username=username, address=address)
        for lock in SignInLock.objects.active(now).filter(scope=scope, key=key)
    ]
    return max(locks, key=lambda lock: lock.locked_until, default=None)


def _limit(scope: str) -> int:
    if scope == SignInScope.ACCOUNT:
        return settings.RACKPILOT_SIGNIN_MAX_FAILURES
    return settings.RACKPILOT_SIGNIN_MAX_FAILURES_PER_ADDRESS


def record_failure(*, username: str, address: str, now: datetime | None = None) -> SignInLock | None:
    """Count one failed sign-in against its name and address; lock what reached its limit in the window (audited).
    A try refused by a lock is not counted (the lock ends when it says). Returns the lock now refusing, if any."""
    now = now or timezone.now()
    if active_lock(username=username, address=address, now=now) is not None:
        return active_lock(username=username, address=address, now=now)
    window_start = now - timedelta(seconds=settings.RACKPILOT_SIGNIN_WINDOW_SECONDS)
    with transaction.atomic():
        SignInFailure.objects.filter(created__lte=window_start).delete()
        for scope, key in _keys(username=username, address=address):
            SignInFailure.objects.create(scope=scope, key=key, created=now)
            failures = SignInFailure.objects.filter(scope=scope, key=key, created__gt=window_start).count()
            limit = _limit(scope)
            if limit <= 0 or failures < limit:
                continue
            lock = SignInLock.objects.create(
                scope=scope,
                key=key,
                failures=failures,
                created=now,
                locked_until=now + timedelta(seconds=settings.RACKPILOT_SIGNIN_LOCKOUT_SECONDS),
            )
            SignInFailure.objects.filter(scope=scope, key=key).delete()  # the lock starts a new count
            audit.record(
                AuditAction.LOCK,
                object_type="accounts.signinlock",
                object_id=str(lock.pk),
                object_repr=f"sign-in for {lock} locked",
                changes={
                    "failures": [None, failures],
                    "window_seconds": [None, settings.RACKPILOT_SIGNIN_WINDOW_SECONDS],
                    "locked_until": [None, lock.locked_until.isoformat()],
                },
            )
    return active_lock(username=username, address=address, now=now)


def signed_in(*, username: str) -> None:
    """A good sign-in clears the account's failures (its address keeps its count: one good account does not buy
    an address more guesses at others)."""
    SignInFailure.objects.filter(scope=SignInScope.ACCOUNT, key=username[:KEY_LENGTH]).delete()


def lift(*, lock: SignInLock, user=None, now: datetime | None = None) -> bool:
    """End a lock now and forget its key's failures (audited, naming who lifted it). False if it was not active."""
    now = now or timezone.now()
    with transaction.atomic():
        if not SignInLock.objects.active(now).filter(pk=lock.pk).update(lifted_at=now, lifted_by=user):
            return False
        SignInFailure.objects.filter(scope=lock.scope, key=lock.key).delete()
        audit.record(
            AuditAction.UNLOCK,
            object_type="accounts.signinlock",
            object_id=str(lock.pk),
            object_repr=f"sign-in for {lock} unlocked",
            changes={"locked_until": [lock.locked_until.isoformat(), now.isoformat()]},
            user=user,
        )
    lock.refresh_from_db()
    return True


def lift_for(*, key: str, user=None, now: datetime | None = None) -> int:
    """Lift every active lock of an account name or address; how many were lifted."""
    now = now or timezone.now()
    return sum(lift(lock=lock, user=user, now=now) for lock in SignInLock.objects.active(now).filter(key=key))


def refusal(lock: SignInLock) -> str:
    """What the sign-in page says: why, until when, and who can end it sooner."""
    what = "this account" if lock.scope == SignInScope.ACCOUNT else "your address"
    until = timezone.localtime(lock.locked_until).strftime("%Y-%m-%d %H:%M %Z")
    return (
        f"Too many failed sign-ins for {what}: sign-in is locked until {until}. "
        "Try again then, or ask an admin to lift the lock."
    )
