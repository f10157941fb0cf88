"""nvidia-imex-ctl -N: the IMEX domain's status as the tray's IMEX command service reports it.

The format is the one driver 570's IMEX package prints (an 18-tray GB200 domain's capture in AWS's GB200 sample,
awsome-distributed-training): the connectivity legend, a timestamp, one line per node (address, state, version),
the From/To connection matrix and the domain's state. A lost peer reads UNAVAILABLE, unreachable ("I") from
itself and disconnected ("D") from the others, and the domain DEGRADED: the words the legend gives, not yet checked
against a capture of a failing domain.
"""

from apps.simulator.state import DRIVER_VERSION
from apps.simulator.terminal import CommandOutput, Context, not_found, ok
from apps.simulator.tools.common import SIM_NOW

LEGEND = """\
Connectivity Table Legend:
I - Invalid - Node wasn't reachable, no connection status available
N - Never Connected
R - Recovering - Connection was lost, but clean up has not yet been triggered.
D - Disconnected - Connection was lost, and clean up has been triggreed.
A - Authenticating - If GSSAPI enabled, client has initiated mutual authentication.
!V! - Version mismatch, communication disabled.
!M! - Node map mismatch, communication disabled.
C - Connected - Ready for operation
"""
USAGE = (
    "Usage: nvidia-imex-ctl [-i <IP> <PORT>|-u <unix domain socket path>|-c <nvidia-imex config.cfg path>] "
    "<-n|-N|-q|-s|-d|-m> [-t <timeout>]\n"
)


def imex_ctl(context: Context, argv: list[str]) -> CommandOutput:
    domain = context.state.domain
    if domain is None:
        return not_found(argv[0])  # the IMEX package is installed on the trays of a rack-scale domain only
    if "-N" not in argv[1:]:
        return CommandOutput(1, "", USAGE)
    return ok(domain_status(context))


def domain_status(context: Context) -> str:
    domain = context.state.domain
    version = ".".join(DRIVER_VERSION.split(".")[:2])
    lines = [LEGEND, f"{SIM_NOW.month}/{SIM_NOW.day}/{SIM_NOW:%Y %H:%M:%S}.000", "Nodes:"]
    lost = [peer.hostname in domain.imex_lost for peer in domain.imex_peers]
    for number, (peer, gone) in enumerate(zip(domain.imex_peers, lost, strict=True)):
        line = f"Node #{number:<4}- {peer.address:<16}- {'UNAVAILABLE' if gone else 'READY':<21}"
        lines.append((line + f"- Version: {version}") if not gone else line.rstrip())
    lines.append("")
    count = len(domain.imex_peers)
    lines.append((" Nodes From\\To  " + "".join(f"{number:<4}" for number in range(count))).rstrip())
    for source in range(count):
        cells = ["I" if lost[source] else ("D" if lost[target] else "C") for target in range(count)]
        lines.append((f"{source:>8}        " + "".join(f"{cell:<4}" for cell in cells)).rstrip())
    lines += ["", f"Domain State: {'DEGRADED' if any(lost) else 'UP'}"]
    return "\n".join(lines) + "\n"


COMMANDS = {"nvidia-imex-ctl": imex_ctl}
