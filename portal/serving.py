"""What a server process does once, at start, before its first request (portal/asgi.py; the in-process benches do
the same, so their `first` request is a server's)."""

from django.urls import get_resolver

from portal.gctune import tune_for_serving


def start_serving() -> None:
    """Import the URLconf, and with it every app's views, and build its reverse lookup now: Django does both lazily,
    so the first request paid them (~300 ms and ~150 ms of the dashboard's first request at 512 nodes,
    bench/pages.py). Then the garbage collector's settings, which freeze what start-up allocated, this included."""
    resolver = get_resolver()
    resolver.url_patterns  # noqa: B018 (the property imports the URLconf)
    resolver.reverse_dict  # noqa: B018 (the property builds every name's patterns)
    tune_for_serving()
