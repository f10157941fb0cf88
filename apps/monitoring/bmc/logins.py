"""What BMC settings may hold: shared by the settings form and the API serializer (one rule, two doors)."""

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator

from apps.inventory.models.access import validate_host
from apps.monitoring.choices import BmcProtocol

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
