"""`figure_script`: Django's json_script for large figures. Same element and escapes (<, > and & as \\u escapes), made
with str.replace: on a 256-node sweep's heatmap (~700 KiB of JSON) str.translate, which json_script uses, took most of
the run page's time."""

import json

from django import template
from django.core.serializers.json import DjangoJSONEncoder
from django.utils.html import format_html
from django.utils.safestring import mark_safe

register = template.Library()


@register.filter
def figure_script(value, element_id: str):
    text = json.dumps(value, cls=DjangoJSONEncoder, separators=(",", ":"))
    text = text.replace("<", "\\u003C").replace(">", "\\u003E").replace("&", "\\u0026")
    return format_html('<script id="{}" type="application/json">{}</script>', element_id, mark_safe(text))  # noqa: S308 (escaped above, as json_script does)
