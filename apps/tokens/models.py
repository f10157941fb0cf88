"""API tokens: a name, an owner, an expiry; only a hash of the secret is kept, and a prefix to tell them apart."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from apps.core.models import PublicModel


class ApiTokenQuerySet(models.QuerySet):
    def visible_to(self, user) -> "ApiTokenQuerySet":
        """Admins see every user's tokens; everyone else their own."""
        return self if user.is_admin_role else self.filter(user=user)

    def usable(self) -> "ApiTokenQuerySet":
        return self.filter(revoked__isnull=True, expires__gt=timezone.now())


class ApiToken(PublicModel):
    """A secret that authenticates `Authorization: Token <secret>` as its user until it expires or is revoked."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, help_text="What the token is for, e.g. the automation that uses it.")
    prefix = models.CharField(max_length=16, help_text="The secret's first characters, shown to tell tokens apart.")
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the secret, hex.")
    expires = models.DateTimeField()
    last_used = models.DateTimeField(null=True, blank=True, help_text="Updated at most once a minute.")
    revoked = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="revoked_api_tokens"
    )

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]
        verbose_name = "API token"
        constraints = [
            models.CheckConstraint(condition=Q(expires__gt=models.F("created")), name="api_token_expires_after_created")
        ]

    def __str__(self) -> str:
        return f"{self.prefix}… {self.name} ({self.user.get_username()})"

    @property
    def state(self) -> str:
        if self.revoked:
            return "revoked"
        return "expired" if self.expires <= timezone.now() else "active"
