"""Stored values in words on a page: `{{ value|in_words }}`, never Python's repr of a dict or a list."""

from django import template

from apps.core.audit import in_words as _in_words

register = template.Library()


@register.filter
def in_words(value) -> str:
    return _in_words(value)
