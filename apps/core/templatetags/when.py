"""{% load when %} then {{ moment|ago }}: "just now" under a minute, else "3 minutes ago" (never "0 minutes ago")."""

from django import template
from django.utils import timezone
from django.utils.timesince import timesince

register = template.Library()


@register.filter
def ago(moment) -> str:
    if not moment:
        return "—"
    now = timezone.now()
    if (now - moment).total_seconds() < 60:
        return "just now"
    return f"{timesince(moment, now)} ago"
