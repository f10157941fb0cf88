from django.contrib.auth.models import AbstractUser
from django.db import models

from apps.accounts.choices import ROLE_RANK, Role


class User(AbstractUser):
    """A person or automation account. The role decides what it may do: read, run jobs, or change everything."""

    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)

    class Meta:
        ordering = ["username"]

    def has_role(self, role: str) -> bool:
        if self.is_superuser:
            return True
        return ROLE_RANK[Role(self.role)] >= ROLE_RANK[Role(role)]

    @property
    def is_operator(self) -> bool:
        return self.has_role(Role.OPERATOR)

    @property
    def is_admin_role(self) -> bool:
        return self.has_role(Role.ADMIN)


class SignInScope(models.TextChoices):
    """What a sign-in lock counts failures against: the account tried, or the address the tries came from."""

    ACCOUNT = "account", "Account"
    ADDRESS = "address", "Address"


class SignInFailure(models.Model):
    """One failed sign-in, counted against its account name and its address for RACKPILOT_SIGNIN_WINDOW_SECONDS.
    Rows older than the window are removed as new failures come in."""

    scope = models.CharField(max_length=8, choices=SignInScope.choices)
    key = models.CharField(max_length=150, help_text="The account name tried, or the client's address.")
    created = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["scope", "key", "created"], name="signin_failure_key_time")]

    def __str__(self) -> str:
        return f"{self.scope} {self.key} at {self.created:%Y-%m-%d %H:%M:%S}"


class SignInLockQuerySet(models.QuerySet):
    def active(self, now) -> "SignInLockQuerySet":
        return self.filter(locked_until__gt=now, lifted_at=None)


class SignInLock(models.Model):
    """Sign-in refused for an account name or an address until `locked_until`, after too many failures in the
    window (docs/configuration.md, "Sign-in"); an admin may lift it early (the admin, `manage.py signin_unlock`)."""

    scope = models.CharField(max_length=8, choices=SignInScope.choices)
    key = models.CharField(max_length=150)
    failures = models.PositiveIntegerField(help_text="Failures in the window when it was locked.")
    created = models.DateTimeField()
    locked_until = models.DateTimeField(db_index=True)
    lifted_at = models.DateTimeField(null=True, blank=True)
    lifted_by = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.SET_NULL, related_name="sign_in_locks_lifted"
    )

    objects = SignInLockQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"{self.get_scope_display().lower()} {self.key}"
