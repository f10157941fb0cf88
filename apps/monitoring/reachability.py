"""Whether a node still answers, as the periodic reads over SSH find it: the `kernel-log` job reaches every compute
node every 5 minutes (apps/monitoring/kinds/kernel_log.py), so a node whose connection times out there is recorded
`node_unreachable` (critical, source `kernel_log`: the read that found it) with the error line and the job, folded
while it stays so, and cleared by validation at the first read that reaches the node again.

Only a connection that times out counts: the address answers nothing at all, as a hung kernel does. A refused
connection is a node rebooting (its kernel answers, sshd is not up yet), and "No route to host" one powered off (by
its BMC: the coolant leak's policy, an operator), so neither is recorded: a power cycle would undo what was meant.
A command that ran and failed reached the node."""

import re

from django.utils import timezone

from apps.health import services as health
from apps.health.choices import ClearedBy, Severity, Source
from apps.health.models import HealthEvent
from apps.nodeexec.base import CommandResult

KIND = "node_unreachable"
# The OpenSSH client's line (exit status 255) when the connection timed out; the sim transport prints it too.
SSH_TIMED_OUT = re.compile(r"^ssh: connect to host \S+ port \d+: Connection timed out$", re.MULTILINE)
# The ssh transport's TransportError when asyncssh's connect_timeout ran out (apps/nodeexec/ssh.py); not through a
# jump host, whose own failure says nothing of the node.
TRANSPORT_TIMED_OUT = re.compile(r"^ssh to \S+ failed: (?:TimeoutError|.*timed out)", re.IGNORECASE)


def timed_out_line(result: CommandResult) -> str | None:
    """The error line when the connection to the node timed out (the node answers nothing), else None."""
    if result.exit_code is None and result.error and TRANSPORT_TIMED_OUT.match(result.error):
        return result.error.strip()
    if result.exit_code == 255:
        match = SSH_TIMED_OUT.search(result.stderr.decode("utf-8", "replace"))
        return match.group(0) if match else None
    return None


def reached(result: CommandResult) -> bool:
    """Whether a command ran on the node (whatever its exit status): not the ssh client's own failure."""
    if result.exit_code is None:
        return False
    return result.exit_code != 255 or not result.stderr.decode("utf-8", "replace").startswith("ssh: ")


def record_reachability(*, nodes: dict, silent: dict[str, str], answered: set[str], job=None, command: str):
    """`silent`: hostname -> the error line of a read that timed out; `answered`: the hostnames a read reached.
    Records (or folds) node_unreachable on the silent ones; clears it on those that answered (one query finds the
    few open ones, so a fleet that answers costs one read)."""
    now = timezone.now()
    for hostname, line in sorted(silent.items()):
        if (node := nodes.get(hostname)) is None:
            continue
        health.record_event(
            component=node,
            source=Source.KERNEL_LOG,
            kind=KIND,
            severity=Severity.CRITICAL,
            summary=f"{hostname}: does not answer over SSH (the connection timed out)",
            evidence={"error": line, "command": command, **({"job": str(job.public_id)} if job is not None else {})},
            at=now,
        )
    back = HealthEvent.objects.filter(kind=KIND, node__hostname__in=sorted(answered)).open().select_related("node")
    for event in back:
        health.clear_event(
            event=event,
            by=ClearedBy.VALIDATION,
            reason=f"{event.node.hostname} answers over SSH again",
            validation={"command": command, **({"job": str(job.public_id)} if job is not None else {})},
            at=now,
        )
