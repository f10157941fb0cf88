"""Creating, checking and revoking API tokens. The secret exists only in the creator's answer: the table keeps its
SHA-256 (a high-entropy random secret needs no slow hash) and its first characters."""

import hashlib
import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from apps.core import audit
from apps.core.choices import AuditAction
from apps.tokens.models import ApiToken

SECRET_MARK = "rpt_"  # tells a Rackpilot token apart in a config file or a secret scanner's findings
PREFIX_LENGTH = len(SECRET_MARK) + 8
# A token used in a busy loop still costs one write a minute, not one a request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class TokenRefused(Exception):
    """The secret names no usable token; the message says why, for the 401 answer."""


def digest_of(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def max_lifetime() -> timedelta:
    return timedelta(days=settings.RACKPILOT_API_TOKEN_MAX_DAYS)


def create_token(*, user, name: str, expires: datetime) -> tuple[ApiToken, str]:
    """A new token for `user` and its secret, which nobody can read again afterwards."""
    now = timezone.now()
    if expires <= now:
        raise ValueError("The expiry must be in the future.")
    if expires - now > max_lifetime() + timedelta(days=1):  # a date picked on the last allowed day still fits
        raise ValueError(f"A token may live at most {settings.RACKPILOT_API_TOKEN_MAX_DAYS} days.")
    secret = SECRET_MARK + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name, prefix=secret[:PREFIX_LENGTH], digest=digest_of(secret), expires=expires
    )
    _record(AuditAction.CREATE, token, changes={"expires": [None, token.expires.isoformat()]})
    return token, secret


def revoke_token(*, token: ApiToken, by) -> bool:
    """Revokes the token; False when it already was (nothing changes, nothing is recorded)."""
    now = timezone.now()
    if not ApiToken.objects.filter(pk=token.pk, revoked__isnull=True).update(revoked=now, revoked_by=by, updated=now):
        return False
    token.refresh_from_db()
    _record(AuditAction.DELETE, token, user=by)
    return True


def authenticate_secret(secret: str) -> ApiToken:
    """The usable token the secret belongs to, its last use noted; TokenRefused otherwise."""
    token = ApiToken.objects.select_related("user").filter(digest=digest_of(secret)).first()
    if token is None:
        raise TokenRefused("Invalid token.")
    if token.revoked:
        raise TokenRefused("This API token has been revoked.")
    now = timezone.now()
    if token.expires <= now:
        raise TokenRefused(f"This API token expired on {token.expires:%Y-%m-%d %H:%M} UTC.")
    if not token.user.is_active:
        raise TokenRefused("User inactive or deleted.")
    if token.last_used is None or now - token.last_used >= LAST_USED_RESOLUTION:
        # Conditional, so parallel requests in the same minute make one write between them.
        stale = Q(last_used__isnull=True) | Q(last_used__lte=now - LAST_USED_RESOLUTION)
        ApiToken.objects.filter(stale, pk=token.pk).update(last_used=now)
        token.last_used = now
    return token


def _record(action: str, token: ApiToken, *, changes: dict | None = None, user=None) -> None:
    # Named by its prefix and owner: the secret, or its digest, never reaches the log.
    audit.record(
        action,
        object_type=ApiToken._meta.label_lower,
        object_id=str(token.public_id),
        object_repr=f"API token {token.prefix}… {token.name!r} of {token.user.get_username()}",
        changes=changes,
        user=user,
    )
