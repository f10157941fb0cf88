from django import forms
from django.contrib.auth.forms import AuthenticationForm

from apps.accounts import lockout


class SignInForm(AuthenticationForm):
    """Django's sign-in form, saying so when the account or the address is locked out (the failure that reaches the
    limit says it too), instead of "wrong password"."""

    def clean(self):
        username = str(self.cleaned_data.get("username") or "")
        address = lockout.client_address(self.request)
        lock = lockout.active_lock(username=username, address=address)
        if lock is None:
            try:
                return super().clean()
            except forms.ValidationError:
                lock = lockout.active_lock(username=username, address=address)
                if lock is None:
                    raise
        raise forms.ValidationError(lockout.refusal(lock), code="locked")
