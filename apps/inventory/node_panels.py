"""Sections of the node page from apps above the inventory (monitoring shows the node's BMC readings there).

The same hook as the dashboard's panels (apps/inventory/dashboard.py): the inventory owns the registry, an app above
fills it from its AppConfig.ready(), so the node page shows their part without the inventory importing them.
"""

from collections.abc import Callable
from dataclasses import dataclass

from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.safestring import SafeString


@dataclass(frozen=True)
class NodePanel:
    name: str
    template: str
    context: Callable[[object, HttpRequest], dict]  # (node, request) -> the template's context


_PANELS: dict[str, NodePanel] = {}


def register_node_panel(*, name: str, template: str, context: Callable[[object, HttpRequest], dict]) -> None:
    if name in _PANELS:
        raise ValueError(f"A node page panel named {name!r} is registered already.")
    _PANELS[name] = NodePanel(name, template, context)


def render_node_panels(node, request: HttpRequest) -> list[SafeString]:
    return [
        render_to_string(panel.template, panel.context(node, request), request=request) for panel in _PANELS.values()
    ]
