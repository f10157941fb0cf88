"""SSH host key helpers that need no SSH library."""

import base64
import binascii
import hashlib


def fingerprint_of(public_key: str) -> str:
    """The SHA256 fingerprint of an OpenSSH public key line, as `ssh-keygen -lf` prints it."""
    try:
        blob = base64.b64decode(public_key.split()[1], validate=True)
    except (IndexError, binascii.Error):
        raise ValueError("not an OpenSSH public key") from None
    digest = hashlib.sha256(blob).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")
