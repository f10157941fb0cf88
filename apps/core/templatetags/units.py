"""{% load units %} then {{ value|link_rate }}: apps.core.units in templates."""

from django import template

from apps.core import units

register = template.Library()


@register.filter
def link_rate(value) -> str:
    return units.link_rate(float(value)) if value not in (None, "") else "—"


@register.filter
def percent(share) -> str:
    return units.percent(float(share)) if share not in (None, "") else "—"
