"""Where Rackpilot may connect to on its own (BMCs, and later Prometheus and webhooks): never to link-local or
cloud metadata addresses unless RACKPILOT_OUTBOUND_ALLOW_LINK_LOCAL says so (OWASP's SSRF advice: an address typed
into a form must not turn the server into a reader of its host's instance credentials)."""

import ipaddress
import socket

from django.conf import settings

# Metadata services reachable without being link-local (AWS's IPv6 one, Alibaba's 100.100.100.200).
METADATA_ADDRESSES = frozenset({ipaddress.ip_address("fd00:ec2::254"), ipaddress.ip_address("100.100.100.200")})
METADATA_NAMES = frozenset({"metadata", "metadata.google.internal", "instance-data", "instance-data.ec2.internal"})


class OutboundRefused(ValueError):
    """The target is one Rackpilot does not connect to; the message names it."""


def check_target(host: str) -> None:
    """Raise OutboundRefused when `host` (a name or an address) is, or resolves to, a link-local/metadata address."""
    if settings.RACKPILOT_OUTBOUND_ALLOW_LINK_LOCAL:
        return
    if host.lower().rstrip(".") in METADATA_NAMES:
        raise OutboundRefused(f"{host} is a cloud metadata service: Rackpilot does not connect to it")
    for address in _addresses(host):
        if address.is_link_local or address in METADATA_ADDRESSES:
            raise OutboundRefused(
                f"{host} is a link-local or metadata address ({address}): Rackpilot does not connect to it "
                "(RACKPILOT_OUTBOUND_ALLOW_LINK_LOCAL)"
            )


def _addresses(host: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return []  # not resolvable: the connection itself fails, with its own clear error
    return [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]


def public_addresses(host: str, *, allow_private: bool = False) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The addresses `host` resolves to, each checked: loopback, private (RFC 1918, unique-local), shared, reserved,
    multicast and unspecified ones are refused unless `allow_private`; link-local and metadata ones always (unless
    RACKPILOT_OUTBOUND_ALLOW_LINK_LOCAL). Connect to one of these addresses, not to the name again, so a DNS answer
    that changes between the check and the connection (rebinding) cannot reach what was refused. Raises
    OutboundRefused naming the host and address, or OSError when the name does not resolve."""
    check_target(host)
    addresses = _addresses(host)
    if not addresses:
        raise OSError(f"{host} does not resolve")
    if allow_private:
        return addresses
    for address in addresses:
        mapped = getattr(address, "ipv4_mapped", None) or address
        if (
            mapped.is_loopback
            or mapped.is_private
            or mapped.is_reserved
            or mapped.is_multicast
            or mapped.is_unspecified
            or mapped in ipaddress.ip_network("100.64.0.0/10")
        ):
            raise OutboundRefused(
                f"{host} is a loopback, private or reserved address ({address}): Rackpilot does not send to it "
                "(RACKPILOT_WEBHOOK_ALLOW_PRIVATE)"
            )
    return addresses
