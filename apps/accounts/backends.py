"""The password check every sign-in goes through: Django's, refused while the name or address is locked out."""

from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied

from apps.accounts import lockout


class LockingModelBackend(ModelBackend):
    """ModelBackend that refuses (PermissionDenied: no other backend is asked) a sign-in whose account name or
    address is locked (apps/accounts/lockout.py), whether or not the password is right."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        name = username if username is not None else kwargs.get(self.user_model_field())
        if lockout.active_lock(username=str(name or ""), address=lockout.client_address(request)) is not None:
            raise PermissionDenied("sign-in locked")
        return super().authenticate(request, username=username, password=password, **kwargs)

    def user_model_field(self) -> str:
        from django.contrib.auth import get_user_model

        return get_user_model().USERNAME_FIELD
