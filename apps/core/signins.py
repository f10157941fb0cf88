"""Logins, logouts and failed logins in the audit log, never a password. API tokens record their own creation and
revocation (apps/tokens/services.py)."""

from django.contrib.auth import get_user_model, user_logged_in, user_logged_out, user_login_failed
from django.dispatch import receiver

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
