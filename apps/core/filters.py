"""Filters of the audit log, shared by its page and its exports."""

import django_filters

from apps.core.choices import AuditAction, ChangeSource
from apps.core.models import AuditEntry


class AuditEntryFilter(django_filters.FilterSet):
    object_type = django_filters.CharFilter(label="Object type")
    object_id = django_filters.CharFilter(label="Object id")
    object = django_filters.CharFilter(field_name="object_repr", lookup_expr="icontains", label="Object")
    actor = django_filters.CharFilter(field_name="actor_name", label="Who")
    source = django_filters.ChoiceFilter(choices=ChangeSource.choices, label="Through")
    action = django_filters.ChoiceFilter(choices=AuditAction.choices, label="Action")
    job = django_filters.UUIDFilter(label="Job")
    since = django_filters.IsoDateTimeFilter(field_name="created", lookup_expr="gte", label="Since")
    until = django_filters.IsoDateTimeFilter(field_name="created", lookup_expr="lte", label="Until")

    class Meta:
        model = AuditEntry
        fields = []
