"""Sections of the node page from apps above the inventory: its incidents (diagnosis), its BMC readings (monitoring).

The same pattern as the dashboard's panels (apps/inventory/dashboard.py): the inventory may not import the apps above
it, so they register a template and a context function for a node from their AppConfig.ready().
"""

from collections.abc import Callable
from dataclasses import dataclass

from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.safestring import SafeString


@dataclass(frozen=True)
class NodeSection:
    name: str
    template: str
    context: Callable[[object, HttpRequest], dict]  # (node, request) -> the template's context


_SECTIONS: dict[str, NodeSection] = {}


def register_node_section(*, name: str, template: str, context: Callable[[object, HttpRequest], dict]) -> None:
    """Adds a section to every node page, after those already registered; a name is registered once."""
    if name in _SECTIONS:
        raise ValueError(f"A node page section named {name!r} is registered already.")
    _SECTIONS[name] = NodeSection(name, template, context)


def render_node_sections(request: HttpRequest, node) -> list[SafeString]:
    return [
        render_to_string(section.template, section.context(node, request), request=request)
        for section in _SECTIONS.values()
    ]
