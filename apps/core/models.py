"""Abstract bases every Rackpilot model stands on, and the audit log."""

import uuid

from django.conf import settings
from django.db import models

from apps.core.choices import AuditAction, ChangeSource


class TimestampedModel(models.Model):
    """Adds created/updated timestamps."""

    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class PublicModel(TimestampedModel):
    """A model addressed by a UUID in URLs and the API; the integer key stays internal."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)

    class Meta:
        abstract = True


class AuditEntryQuerySet(models.QuerySet):
    def for_object(self, obj: models.Model) -> "AuditEntryQuerySet":
        return self.filter(object_type=obj._meta.label_lower, object_id=str(obj.pk))


class AuditEntry(models.Model):
    """One create, update or delete of an audited object: who, when, through what, and which fields changed."""

    created = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_entries"
    )
    actor_name = models.CharField(max_length=150, blank=True, help_text="Kept when the user is deleted.")
    source = models.CharField(max_length=16, choices=ChangeSource.choices)
    action = models.CharField(max_length=16, choices=AuditAction.choices)
    object_type = models.CharField(max_length=100, db_index=True)
    object_id = models.CharField(max_length=64)
    object_repr = models.CharField(max_length=200)
    changes = models.JSONField(default=dict, blank=True, help_text="field: [before, after]")
    job = models.UUIDField(null=True, blank=True, db_index=True, help_text="The job whose run made the change.")

    objects = AuditEntryQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]
        verbose_name_plural = "audit entries"
        indexes = [models.Index(fields=["object_type", "object_id"], name="audit_object_idx")]

    def __str__(self) -> str:
        return f"{self.actor_name or 'system'} {self.action} {self.object_type} {self.object_repr}"
