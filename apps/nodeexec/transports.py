"""Transport registry: the job engine asks for a transport by name (ssh, local, sim)."""

from collections.abc import Iterable, Sequence

from django.conf import settings

from apps.core.choices import Transport
from apps.nodeexec.local import LocalTransport
from apps.nodeexec.sim import SimTransport

TRANSPORT_NAMES = tuple(Transport.values)
TRANSPORT_CHOICES = [(name, name) for name in TRANSPORT_NAMES]


def default_transport(*, offered: Sequence[str] = TRANSPORT_NAMES, nodes: Iterable = ()) -> str:
    """The transport work runs over when its request names none, for a kind, suite or form that runs over `offered`.
    The nodes' own (Node.transport: the demo's are loaded as `sim`) when every node of `nodes` records the same one
    and it is offered and allowed; else the install's RACKPILOT_JOB_DEFAULT_TRANSPORT when offered; else the first
    offered (a kind lists its transports in the order it prefers them). The one place every caller asks; none of
    them falls back on its own."""
    recorded = {getattr(node, "transport", "") for node in nodes}
    if len(recorded) == 1:
        (own,) = recorded
        if own and own in offered and own in settings.RACKPILOT_JOB_TRANSPORTS:
            return own
    chosen = settings.RACKPILOT_JOB_DEFAULT_TRANSPORT
    return chosen if chosen in offered else offered[0]


def get_transport(name: str, *, marker: str | None = None):
    """`marker`: every command started carries RACKPILOT_JOB=<marker> (ssh, local), so what a lost worker left
    running can be found and ended."""
    if name == "ssh":
        from apps.nodeexec.ssh import SshTransport

        keys = [settings.RACKPILOT_SSH_KEY] if settings.RACKPILOT_SSH_KEY else []
        return SshTransport(
            username=settings.RACKPILOT_SSH_USER,
            client_keys=keys,
            connect_timeout=settings.RACKPILOT_SSH_CONNECT_TIMEOUT,
            marker=marker,
        )
    if name == "local":
        return LocalTransport(marker=marker)
    if name == "sim":
        return SimTransport()
    raise ValueError(f"unknown transport {name!r}")
