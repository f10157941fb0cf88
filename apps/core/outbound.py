"""Where Rackpilot may connect to on its own (BMCs, service endpoints, webhooks, Prometheus): never to link-local or
cloud metadata addresses, in any spelling (IPv4-mapped, NAT64, 6to4 and Teredo IPv6 forms of one are judged as the
IPv4 address inside), unless RACKPILOT_OUTBOUND_ALLOW_LINK_LOCAL says so (OWASP's SSRF advice: an address typed
into a form must not turn the server into a reader of its host's instance credentials)."""

import ipaddress
import socket

from django.conf import settings

# Metadata services reachable without being link-local (AWS's IPv6 one, Alibaba's 100.100.100.200).
METADATA_ADDRESSES = frozenset({ipaddress.ip_address("fd00:ec2::254"), ipaddress.ip_address("100.100.100.200")})
METADATA_NAMES = frozenset({"metadata", "metadata.google.internal", "instance-data", "instance-data.ec2.internal"})
# IPv6 prefixes that carry an IPv4 address in their last 32 bits: the NAT64 well-known prefix (RFC 6052) and the
# local-use one (RFC 8215, as most deployments use it: a /96), IPv4-compatible addresses (::a.b.c.d, deprecated but
# still parsed), and SIIT's IPv4-translated ones (::ffff:0:a.b.c.d). A NAT64 gateway or a dual stack turns each into
# a connection to the IPv4 address inside, so the guard judges that address.
EMBEDDING_PREFIXES = tuple(
    ipaddress.ip_network(prefix) for prefix in ("64:ff9b::/96", "64:ff9b:1::/96", "::/96", "::ffff:0:0:0/96")
)


class OutboundRefused(ValueError):
    """The target is one Rackpilot does not connect to; the message names it."""


def check_target(host: str) -> None:
    """Raise OutboundRefused when `host` (a name or an address) is, or resolves to, a link-local/metadata address."""
    if settings.RACKPILOT_OUTBOUND_ALLOW_LINK_LOCAL:
        return
    if host.lower().rstrip(".") in METADATA_NAMES:
        raise OutboundRefused(f"{host} is a cloud metadata service: Rackpilot does not connect to it")
    for address in _addresses(host):
        if any(form.is_link_local or form in METADATA_ADDRESSES for form in forms(address)):
            raise OutboundRefused(
                f"{host} is a link-local or metadata address ({address}): Rackpilot does not connect to it "
                "(RACKPILOT_OUTBOUND_ALLOW_LINK_LOCAL)"
            )


Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def forms(address: Address) -> list[Address]:
    """The address and every IPv4 address it stands for: IPv4-mapped (::ffff:a9fe:a9fe), NAT64 (64:ff9b::a9fe:a9fe),
    IPv4-compatible and -translated, 6to4 (2002:a9fe:a9fe::) and Teredo's client. Judge each: a check that looks only
    at the IPv6 spelling lets the IPv4 address inside through."""
    found = [address]
    if address.version == 6:
        if address.ipv4_mapped:
            found.append(address.ipv4_mapped)
        if address.sixtofour:
            found.append(address.sixtofour)
        if address.teredo:
            found.append(address.teredo[1])
        for prefix in EMBEDDING_PREFIXES:
            if address in prefix and int(address) & 0xFFFFFFFF:
                found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def _addresses(host: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        return [ipaddress.ip_address(host.strip("[]").split("%")[0])]
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
        if any(
            form.is_loopback
            or form.is_private
            or form.is_reserved
            or form.is_multicast
            or form.is_unspecified
            or form in ipaddress.ip_network("100.64.0.0/10")
            # An IPv6 form of an IPv4 address is judged by that address (NAT64's prefix alone reads as reserved).
            for form in (forms(address)[1:] or [address])
        ):
            raise OutboundRefused(
                f"{host} is a loopback, private or reserved address ({address}): Rackpilot does not send to it "
                "(RACKPILOT_WEBHOOK_ALLOW_PRIVATE)"
            )
    return addresses
