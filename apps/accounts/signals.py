"""Failed and good sign-ins feed the lockout count (apps/accounts/lockout.py); the audit entries of both are
written by apps/core/signins.py."""

from django.contrib.auth import get_user_model, user_logged_in, user_login_failed
from django.dispatch import receiver

from apps.accounts import lockout


@receiver(user_login_failed)
def _count_failure(sender, credentials, request=None, **kwargs):
    name = str(credentials.get(get_user_model().USERNAME_FIELD, ""))
    lockout.record_failure(username=name, address=lockout.client_address(request))


@receiver(user_logged_in)
def _clear_failures(sender, request, user, **kwargs):
    lockout.signed_in(username=user.get_username())
