"""A simulated node's boots: a reboot takes it off the network for a while and it comes back with a new boot id.

The last reboot is the SimChange ``boot:last`` = ``{"count", "at", "down_seconds"}`` (apps/simulator/changes.py):
the node answers nothing (as ssh reports a refused connection) from ``at`` for ``down_seconds``, then with boot id
number ``count``. How long a reboot keeps a node away is RACKPILOT_SIM_REBOOT_SECONDS with a ±20 % seeded spread per
node and boot (POST, the kernel and the GPU driver load take minutes on a real HGX; the simulator keeps it short).
"""

import hashlib
import uuid

from apps.simulator import clock
from apps.simulator.model import jitter, noise

BOOT_KEY = "boot:last"
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
# What OpenSSH's client prints, with exit status 255, when nothing listens on the node's port.
REFUSED = "ssh: connect to host {host} port 22: Connection refused\n"
# ... and when the node is powered off: nothing answers ARP for its address.
POWERED_OFF = "ssh: connect to host {host} port 22: No route to host\n"
# ... and when its kernel hung: the address answers nothing at all, not even a refusal, until ConnectTimeout.
HUNG = "ssh: connect to host {host} port 22: Connection timed out\n"


def next_boot(previous: dict | None, *, hostname: str, seed: int, base_seconds: float, now: float | None = None):
    """The ``boot:last`` value a reboot writes after ``previous`` (None: never rebooted under the simulator)."""
    count = int((previous or {}).get("count", 0)) + 1
    down = jitter(noise(seed, "reboot", hostname, count), base_seconds, 0.2) if base_seconds > 0 else 0.0
    return {"count": count, "at": clock.now() if now is None else now, "down_seconds": round(down, 3)}


def is_down(boot: dict | None, now: float | None = None) -> bool:
    if not boot:
        return False
    now = clock.now() if now is None else now
    return float(boot["at"]) <= now < float(boot["at"]) + float(boot["down_seconds"])


def up_since(boot: dict | None) -> float | None:
    """When the node came up from its last simulated reboot (None: it has not been rebooted)."""
    return None if not boot else float(boot["at"]) + float(boot["down_seconds"])


def boot_id(*, hostname: str, count: int, seed: int) -> str:
    """/proc/sys/kernel/random/boot_id: a random UUID (version 4) on a real kernel; here one per node, boot and seed."""
    digest = hashlib.sha256(f"{seed}|{hostname}|boot|{count}".encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def uptime_text(up_seconds: float) -> str:
    """The `up ...` part of uptime(1) (procps): `N days, H:MM`, `H:MM` or `M min`."""
    minutes = int(max(up_seconds, 0) // 60)
    days, minutes = divmod(minutes, 24 * 60)
    hours, minutes = divmod(minutes, 60)
    text = f"{days} day{'s' if days != 1 else ''}, " if days else ""
    return text + (f"{hours:2d}:{minutes:02d}" if hours else f"{minutes} min")
