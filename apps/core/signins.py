"""Logins, logouts, failed logins and API tokens in the audit log. Never a password, never a token's key."""

from django.contrib.auth import get_user_model, user_logged_in, user_logged_out, user_login_failed
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from rest_framework.authtoken.models import Token

from apps.core import audit
from apps.core.choices import AuditAction


def _client(request) -> dict:
    address = request.META.get("REMOTE_ADDR", "") if request is not None else ""
    return {"from": [None, address]} if address else {}


@receiver(user_logged_in)
def _logged_in(sender, request, user, **kwargs):
    audit.record(AuditAction.LOGIN, obj=user, object_repr=user.get_username(), changes=_client(request), user=user)


@receiver(user_logged_out)
def _logged_out(sender, request, user, **kwargs):
    if user is not None:
        audit.record(AuditAction.LOGOUT, obj=user, object_repr=user.get_username(), user=user)


@receiver(user_login_failed)
def _login_failed(sender, credentials, request=None, **kwargs):
    # Django already masks the password in `credentials`; only the name tried is kept, cut to the field's length.
    name = str(credentials.get(get_user_model().USERNAME_FIELD, ""))[:150]
    audit.record(
        AuditAction.LOGIN_FAILED,
        object_type="accounts.user",
        object_repr=f"login as {name!r}" if name else "login without a user name",
        changes=_client(request),
    )


@receiver(post_save, sender=Token)
def _token_created(sender, instance, created, raw=False, **kwargs):
    if created and not raw:
        _token_entry(AuditAction.CREATE, instance)


@receiver(post_delete, sender=Token)
def _token_revoked(sender, instance, **kwargs):
    _token_entry(AuditAction.DELETE, instance)


def _token_entry(action: str, token: Token) -> None:
    # A token's primary key is its secret: the entry names its owner instead.
    owner = token.user.get_username()
    audit.record(
        action, object_type="authtoken.token", object_id=str(token.user_id), object_repr=f"API token of {owner}"
    )
