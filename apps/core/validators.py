"""Validators shared by the apps' models."""

import unicodedata

from django.core.exceptions import ValidationError
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
