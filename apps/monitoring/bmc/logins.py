"""A node's BMC login: what its settings may hold (shared by the settings form and the API serializer: one rule, two
doors), saving them, and reading them for a poll (`BmcLogin`, the password decrypted in memory only)."""

from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import transaction

from apps.inventory.models import Node
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
    node: Node,
    address: str,
    protocol: str,
    port: int | None,
    user: str,
    verify_tls: bool,
    password: str = "",
    clear_password: bool = False,
) -> Bmc:
    """Create or change a node's BMC settings. An empty `password` keeps the stored one (it is write-only);
    `clear_password` forgets it. The address is the node's own bmc_address. Validated by the form or serializer."""
    bmc = Bmc.objects.filter(node=node).first() or Bmc(node=node)
    bmc.protocol, bmc.port, bmc.user, bmc.verify_tls = protocol, port, user, verify_tls
    if password:
        bmc.set_password(password)
    elif clear_password:
        bmc.set_password("")
    bmc.full_clean(exclude=["node"])
    bmc.save()
    if node.bmc_address != address:
        node.bmc_address = address
        node.save(update_fields=["bmc_address", "updated"])
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


def shard_logins(shard: JobShard) -> dict[str, tuple[int, BmcLogin]]:
    """hostname -> (node id, login) for the shard's nodes that have BMC settings; passwords decrypted here, kept in
    memory only for the poll."""
    node_ids = set(JobStep.objects.filter(shard=shard).values_list("node_id", flat=True))
    logins = {}
    for bmc in Bmc.objects.filter(node_id__in=node_ids).select_related("node"):
        login = BmcLogin(
            hostname=bmc.node.hostname,
            protocol=bmc.protocol,
            address=bmc.node.bmc_address,
            port=bmc.effective_port,
            user=bmc.user,
            password=bmc.password(),
            verify_tls=bmc.verify_tls,
        )
        logins[bmc.node.hostname] = (bmc.node_id, login)
    return logins
