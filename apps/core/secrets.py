"""The one home of secrets at rest (SSH private keys, later BMC passwords): Fernet, keys from the environment.

`RACKPILOT_SECRETS_KEY` holds one or more Fernet keys separated by commas (docs/configuration.md). The first one
encrypts; every one of them decrypts (MultiFernet), so a key is rotated by putting the new one first, running
`rotate()` over the stored values, then dropping the old one. Plaintext is only ever returned by `decrypt` to the
code that uses it; nothing here logs it, and an error never quotes it.
"""

import functools

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class SecretError(Exception):
    """A stored secret could not be decrypted with any of the configured keys."""


@functools.cache
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    if not keys:
        raise ImproperlyConfigured("RACKPILOT_SECRETS_KEY is empty")
    try:
        return MultiFernet([Fernet(key.encode()) for key in keys])
    except (ValueError, TypeError):
        raise ImproperlyConfigured(
            "RACKPILOT_SECRETS_KEY must be Fernet keys (32 url-safe base64-encoded bytes each) separated by commas"
        ) from None


def _current() -> MultiFernet:
    return _fernet(tuple(settings.RACKPILOT_SECRETS_KEYS))


def generate_key() -> str:
    return Fernet.generate_key().decode()


def encrypt(plaintext: str) -> str:
    """The token to store for `plaintext` (a new one every call: the same secret never gives the same column)."""
    return _current().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _current().decrypt(token.encode()).decode()
    except InvalidToken:
        raise SecretError(
            "a stored secret cannot be decrypted with RACKPILOT_SECRETS_KEY (was the key changed without rotation?)"
        ) from None


def rotate(token: str) -> str:
    """Re-encrypt a stored token with the first (newest) key."""
    try:
        return _current().rotate(token.encode()).decode()
    except InvalidToken:
        raise SecretError("a stored secret cannot be decrypted with RACKPILOT_SECRETS_KEY") from None
