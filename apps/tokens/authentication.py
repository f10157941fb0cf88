"""`Authorization: Token <secret>`, the header automation already sends, checked against the hashed tokens."""

from rest_framework import authentication, exceptions

from apps.tokens import services


class ApiTokenAuthentication(authentication.TokenAuthentication):
    """DRF's header parsing and 401 challenge; the secret is looked up by its SHA-256 in ApiToken."""

    def authenticate_credentials(self, key):
        try:
            token = services.authenticate_secret(key)
        except services.TokenRefused as refused:
            raise exceptions.AuthenticationFailed(str(refused)) from None
        return token.user, token
