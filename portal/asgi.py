"""ASGI entry point: HTTP through Django, websockets through Channels with login and origin checks."""

import os
from urllib.parse import urlsplit

from django.core.asgi import get_asgi_application
from django.db import connections

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django_asgi_app = get_asgi_application()


def _no_persistent_connections() -> None:
    """No persistent database connections in the ASGI process (Django's guidance: CONN_MAX_AGE = 0 under ASGI).

    Each request's sync code runs on a thread of its own, and a persistent connection stays with its thread: every
    thread kept one open (40 requests took PostgreSQL from 10 to 50 connections, still 50 a minute later). With 0,
    Django closes the connection when the request ends. Celery workers keep RACKPILOT_DB_CONN_MAX_AGE: their
    threads are few and long-lived. (psycopg's pool, Django's other answer, needs psycopg_pool, which Rackpilot does
    not depend on; a PgBouncer in front of PostgreSQL works with this setting too.)
    """
    for alias in connections:
        connections.settings[alias]["CONN_MAX_AGE"] = 0


_no_persistent_connections()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (Django must be set up first)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.http.request import split_domain_port, validate_host  # noqa: E402

from apps.jobs.consumers import CLOSE_ORIGIN  # noqa: E402
from portal.routing import websocket_urlpatterns  # noqa: E402
from portal.serving import start_serving  # noqa: E402

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(scheme: str, host: str, port: int | None) -> tuple[str, str, int] | None:
    scheme = scheme.lower()
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    return scheme, host.lower().strip("[]"), port or _DEFAULT_PORTS[scheme]


def parse_origin(value: str) -> tuple[str, str, int] | None:
    """ "https://Portal.example.org" -> ("https", "portal.example.org", 443); None for "null" or anything odd."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username or parts.password:
        return None
    return _origin(parts.scheme, parts.hostname or "", port)


def own_origin(scope) -> tuple[str, str, int] | None:
    """The origin the browser used to reach this portal: the websocket's scheme (wss -> https) and its Host
    header, which must be one of ALLOWED_HOSTS."""
    headers = dict(scope.get("headers") or [])
    host = headers.get(b"host", b"").decode("latin-1")
    domain, port = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return None
    secure = scope.get("scheme") == "wss"
    if settings.SECURE_PROXY_SSL_HEADER and headers.get(b"x-forwarded-proto", b"").decode("latin-1") == "https":
        secure = True
    return _origin("https" if secure else "http", domain, int(port) if port else None)


def origin_allowed(scope) -> bool:
    """An Origin equal to the portal's own scheme://host:port, or one listed in RACKPILOT_ALLOWED_ORIGINS.

    Channels' AllowedHostsOriginValidator compared host names only, so a page on the same host but another port or
    scheme (another web server, another origin to the browser) could open sockets with the operator's cookies.
    """
    origin = dict(scope.get("headers") or []).get(b"origin")
    parsed = parse_origin(origin.decode("latin-1")) if origin else None
    if parsed is None:
        return False
    if parsed in {parse_origin(o) for o in settings.RACKPILOT_ALLOWED_ORIGINS}:
        return True
    return parsed == own_origin(scope)


class OriginValidator:
    """Refuse websockets from another origin: accept, then close with CLOSE_ORIGIN (4400), so the page can say why
    (a socket closed before accept only shows the browser a failed handshake)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "websocket" or origin_allowed(scope):
            return await self.app(scope, receive, send)
        message = await receive()
        if message["type"] == "websocket.connect":
            await send({"type": "websocket.accept"})
            await send({"type": "websocket.close", "code": CLOSE_ORIGIN})


application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": OriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
start_serving()
