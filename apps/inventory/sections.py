"""Sections of the inventory's pages that come from apps above the inventory: on the node page its incidents
(diagnosis) and BMC readings (monitoring), on the switch page the benchmarks that crossed its ports (benchmarks), on
the rack page its open leak and coolant events (remediation), first, and its NVLink switch trays' health (health).

The same pattern as the dashboard's panels (apps/inventory/dashboard.py): the inventory may not import the apps above
it, so they register a template and a context function for the page's object from their AppConfig.ready().
"""

from collections.abc import Callable
from dataclasses import dataclass

from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.safestring import SafeString


@dataclass(frozen=True)
class Section:
    name: str
    template: str
    context: Callable[[object, HttpRequest], dict]  # (the page's object, request) -> the template's context


class PageSections:
    """The sections one page shows after its own content, in the order they were registered (those registered
    `first`, the page's most urgent, before the rest)."""

    def __init__(self, page: str):
        self.page = page
        self._sections: dict[str, Section] = {}

    def register(
        self, *, name: str, template: str, context: Callable[[object, HttpRequest], dict], first: bool = False
    ) -> None:
        if name in self._sections:
            raise ValueError(f"A {self.page} page section named {name!r} is registered already.")
        section = Section(name, template, context)
        self._sections = {name: section, **self._sections} if first else {**self._sections, name: section}

    def render(self, request: HttpRequest, obj) -> list[SafeString]:
        return [
            render_to_string(section.template, section.context(obj, request), request=request)
            for section in self._sections.values()
        ]


NODE_PAGE = PageSections("node")
SWITCH_PAGE = PageSections("switch")
# The rack page's come first, under its title: what is urgent about the rack (a coolant leak, apps/remediation).
RACK_PAGE = PageSections("rack")
