"""Webhook sending: the JSON body signed with HMAC-SHA256, POSTed to an address checked at send time and connected to
by that checked address (a name that re-resolves elsewhere between check and connection reaches nothing refused)."""

import hashlib
import hmac
import http.client
import socket
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from apps.core.outbound import OutboundRefused, public_addresses

SIGNATURE_HEADER = "X-Rackpilot-Signature"
TIMESTAMP_HEADER = "X-Rackpilot-Timestamp"


class WebhookAddressError(ValueError):
    """The URL is not one a webhook may be sent to; the message says why."""


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """`sha256=<hex>` of HMAC-SHA256 over `<timestamp>.<body>` with the shared secret (the receiver recomputes it)."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def check_url(url: str, *, allow_private: bool, resolve: bool = True) -> tuple[str, str, int, str]:
    """(scheme, host, port, path with query) of an http(s) URL whose host may be sent to; WebhookAddressError
    otherwise. With `resolve`, the host's addresses are checked too (OutboundRefused)."""
    try:
        parts = urlsplit(url)
        hostname = parts.hostname
    except ValueError:  # a bracketed host that is no IPv6 address
        raise WebhookAddressError("The URL's host in brackets is not an IPv6 address.") from None
    if parts.scheme not in ("http", "https") or not hostname:
        raise WebhookAddressError("A webhook URL starts with http:// or https:// and names a host.")
    if parts.username or parts.password:
        raise WebhookAddressError("Put no user or password in the URL: the shared secret signs each request.")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise WebhookAddressError("The URL's port is not a number from 1 to 65535.") from None
    if resolve:
        public_addresses(parts.hostname, allow_private=allow_private)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.scheme, parts.hostname, port, path


@dataclass(frozen=True)
class Outcome:
    ok: bool
    status: int | None = None
    error: str = ""
    refused: bool = False


def post(*, url: str, body: bytes, headers: dict, secret: str, timeout: float, allow_private: bool) -> Outcome:
    """POST once. ok on any 2xx; a redirect is not followed (it is a failure: the receiver is misconfigured)."""
    try:
        scheme, host, port, path = check_url(url, allow_private=False, resolve=False)
        addresses = public_addresses(host, allow_private=allow_private)
    except (ValueError, OutboundRefused) as error:  # WebhookAddressError; a name IDNA cannot encode
        return Outcome(ok=False, error=str(error), refused=True)
    except OSError as error:
        return Outcome(ok=False, error=f"{host}: {error}")
    timestamp = str(int(time.time()))
    headers = {
        **headers,
        "Content-Type": "application/json",
        "User-Agent": "Rackpilot-Webhook/1",
        TIMESTAMP_HEADER: timestamp,
    }
    if secret:
        headers[SIGNATURE_HEADER] = signature(secret, timestamp, body)
    address = str(addresses[0])
    if scheme == "https":
        connection = http.client.HTTPSConnection(host, port, timeout=timeout, context=ssl.create_default_context())
    else:
        connection = http.client.HTTPConnection(host, port, timeout=timeout)
    # Connect to the address that was checked; TLS still verifies the certificate against the host name.
    connection._create_connection = lambda _address, *args, **kwargs: socket.create_connection(  # noqa: SLF001
        (address, port), timeout
    )
    try:
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        response.read(65536)
        status = response.status
    except (OSError, http.client.HTTPException, ssl.SSLError) as error:
        return Outcome(ok=False, error=f"{host}:{port}: {type(error).__name__}: {error}"[:500])
    finally:
        connection.close()
    if 200 <= status < 300:
        return Outcome(ok=True, status=status)
    return Outcome(ok=False, status=status, error=f"{host}:{port} answered HTTP {status}")
