"""The dashboard's panels from apps above the inventory.

The inventory sits below topology in DESIGN's layers and may not import it, yet its dashboard shows the topology
rules. So the inventory owns this small registry, and an app above fills it from its AppConfig.ready() (topology
adds its rule summary): the call goes up through a hook the lower layer defines, never through an import.
"""

from collections.abc import Callable
from dataclasses import dataclass

from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.safestring import SafeString


@dataclass(frozen=True)
class Panel:
    """One panel: a template rendered with what `context()` returns."""

    name: str
    template: str
    context: Callable[[], dict]


_PANELS: dict[str, Panel] = {}


_FIRST: list[str] = []  # panels shown above the others, full width, in registration order


def register_panel(*, name: str, template: str, context: Callable[[], dict], first: bool = False) -> None:
    """Adds a panel to the dashboard, after those already registered (`first`: above every other panel, as the
    health app's "What is wrong now" is); a name is registered once."""
    if name in _PANELS:
        raise ValueError(f"A dashboard panel named {name!r} is registered already.")
    _PANELS[name] = Panel(name, template, context)
    if first:
        _FIRST.append(name)


def panels() -> list[Panel]:
    return list(_PANELS.values())


def render_panels(request: HttpRequest, *, first: bool = False) -> list[SafeString]:
    """Each panel's HTML, in registration order: those registered `first`, or the others."""
    return [
        render_to_string(panel.template, panel.context(), request=request)
        for panel in _PANELS.values()
        if (panel.name in _FIRST) == first
    ]
