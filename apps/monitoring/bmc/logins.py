"""A BMC login (a node's or an NVLink switch tray's): what its settings may hold (shared by the settings form and
the API serializer: one rule, two doors), saving them, and reading them for a poll (`BmcLogin`, the password
decrypted in memory only)."""

from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import transaction

from apps.inventory.models import Node, NvlinkSwitchTray
from apps.inventory.models.access import validate_host
from apps.jobs.models import JobShard, JobStep
from apps.monitoring.choices import BmcProtocol
from apps.monitoring.models import Bmc

bmc_user_validator = RegexValidator(
    r"^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}\Z", "Enter the BMC login: up to 64 letters, digits and _ . @ - (no spaces)."
)
# What a password may not hold, as a pattern the API's schema shows; the message never quotes the password.
password_characters_validator = RegexValidator(r"^[^\x00-\x1f]*\Z", "A BMC password cannot hold control characters.")
IPMI_PASSWORD_MAX_BYTES = 20  # IPMI 2.0 passwords are at most 20 bytes (RAKP); a longer one can never log in
PASSWORD_MAX_CHARS = 128
SWITCH_TRAY_REDFISH_ONLY = "An NVLink switch tray's BMC is read over Redfish (its leak detectors are only there)."


def validate_bmc_address(value: str) -> None:
    validate_host(value)


def validate_bmc_user(value: str) -> None:
    bmc_user_validator(value)


def validate_password(password: str, protocol: str) -> None:
    """Never quotes the password back."""
    if len(password) > PASSWORD_MAX_CHARS:
        raise ValidationError(f"A BMC password has at most {PASSWORD_MAX_CHARS} characters.")
    password_characters_validator(password)
    if protocol == BmcProtocol.IPMI and len(password.encode()) > IPMI_PASSWORD_MAX_BYTES:
        raise ValidationError(f"IPMI 2.0 passwords are at most {IPMI_PASSWORD_MAX_BYTES} bytes; this one is longer.")


@transaction.atomic
def save_bmc(
    *,
    node: Node | None = None,
    switch_tray: NvlinkSwitchTray | None = None,
    address: str,
    protocol: str,
    port: int | None,
    user: str,
    verify_tls: bool,
    password: str = "",
    clear_password: bool = False,
) -> Bmc:
    """Create or change the BMC settings of a node or of an NVLink switch tray (one of them). An empty `password`
    keeps the stored one (it is write-only); `clear_password` forgets it. The address is the owner's own bmc_address.
    Validated by the form or serializer; a ValidationError (naming the field) here saves nothing."""
    if (node is None) == (switch_tray is None):
        raise ValidationError({"node": "A BMC belongs to one node or one NVLink switch tray: name one."})
    if switch_tray is not None and protocol != BmcProtocol.REDFISH:
        raise ValidationError({"protocol": SWITCH_TRAY_REDFISH_ONLY})
    owner, field = (node, "node") if node is not None else (switch_tray, "switch_tray")
    bmc = Bmc.objects.filter(**{field: owner}).first() or Bmc(**{field: owner})
    bmc.protocol, bmc.port, bmc.user, bmc.verify_tls = protocol, port, user, verify_tls
    if password:
        bmc.set_password(password)
    elif clear_password:
        bmc.set_password("")
    bmc.full_clean(exclude=["node", "switch_tray"])
    bmc.save()
    if owner.bmc_address != address:
        owner.bmc_address = address
        owner.save(update_fields=["bmc_address", "updated"])
    return bmc


@dataclass(frozen=True)
class BmcLogin:
    """One BMC as a poll needs it; read from the database before the fan-out."""

    hostname: str
    protocol: str
    address: str
    port: int
    user: str
    password: str = field(repr=False)
    verify_tls: bool = True

    @property
    def name(self) -> str:
        """How errors name the BMC: its address and the node it belongs to (never its login)."""
        return f"BMC {self.address} ({self.hostname})"


def login_of(bmc: Bmc) -> BmcLogin:
    """A BMC's login as a poll needs it (its owner loaded); the password decrypted here, kept in memory only."""
    return BmcLogin(
        hostname=bmc.owner_name,
        protocol=bmc.protocol,
        address=bmc.address,
        port=bmc.effective_port,
        user=bmc.user,
        password=bmc.password(),
        verify_tls=bmc.verify_tls,
    )


def shard_logins(shard: JobShard) -> dict[str, tuple[int, BmcLogin]]:
    """hostname -> (node id, login) for the shard's nodes that have BMC settings."""
    node_ids = set(JobStep.objects.filter(shard=shard).values_list("node_id", flat=True))
    return {
        bmc.node.hostname: (bmc.node_id, login_of(bmc))
        for bmc in Bmc.objects.filter(node_id__in=node_ids).select_related("node")
    }


def switch_tray_logins(switch_trays) -> dict[str, tuple[int, BmcLogin]]:
    """name -> (switch tray id, login) for the NVLink switch trays (a queryset) that have BMC settings."""
    bmcs = Bmc.objects.filter(switch_tray__in=switch_trays).select_related("switch_tray").order_by("switch_tray__name")
    return {bmc.switch_tray.name: (bmc.switch_tray_id, login_of(bmc)) for bmc in bmcs}
