"""Validators shared by the apps' models."""

import unicodedata

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.utils.deconstruct import deconstructible


@deconstructible
class NameValidator:
    """A name other rows, files and commands refer to (a switch, a rack, a storage tier, a GPU SKU): any printable
    text, but no control or format characters, no line breaks, and no spaces at either end, which would make `r01\\n`
    and `r01` two different racks that look the same."""

    message = "Enter a name without control characters, line breaks or spaces at either end."
    code = "invalid"

    def __call__(self, value: str) -> None:
        # Categories C* (control, format, unassigned) and Z* (separators: line breaks, odd spaces), but a plain space.
        unprintable = any(unicodedata.category(char)[0] in "CZ" and char != " " for char in value)
        if not value or value != value.strip() or unprintable:
            raise ValidationError(self.message, code=self.code)

    def __eq__(self, other) -> bool:
        return isinstance(other, NameValidator)

    def __hash__(self) -> int:
        return hash(NameValidator)


name_validator = NameValidator()


# Addresses as full-match patterns (no anchors): a RegexValidator built from one is both the check and, through
# drf-spectacular (which writes \Z as $), the schema's `pattern`, so a client reads the very rule the API applies.
_LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
HOSTNAME = rf"(?=.{{1,253}}\Z){_LABEL}(?:\.{_LABEL})*"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_H = "[0-9A-Fa-f]{1,4}"
# The textual forms of RFC 4291 §2.2 (1 and 2): eight groups, or fewer with one `::`; no embedded IPv4, no zone.
IPV6 = (
    "(?:"
    + "|".join(
        [
            f"(?:{_H}:){{7}}{_H}",
            f"(?:{_H}:){{1,7}}:",
            f"(?:{_H}:){{1,6}}:{_H}",
            *(f"(?:{_H}:){{1,{5 - n}}}(?::{_H}){{1,{n + 2}}}" for n in range(4)),
            f"{_H}:(?::{_H}){{1,6}}",
            f":(?:(?::{_H}){{1,7}}|:)",
        ]
    )
    + ")"
)
IP_ADDRESS = f"(?:{IPV4}|{IPV6})"
HOST = f"(?:{HOSTNAME}|{IPV6})"  # a dotted IPv4 address is a host name by this pattern's letter

ip_address_validator = RegexValidator(
    rf"^{IP_ADDRESS}\Z", "Enter an IPv4 address such as 10.0.0.5 or an IPv6 address such as fd00::5."
)
host_validator = RegexValidator(rf"^{HOST}\Z", "Enter a host name (letters, digits, dashes and dots) or an IP address.")
