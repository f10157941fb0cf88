"""Tamper-evident documents: a SHA-256 of the content and an Ed25519 signature by the portal's own key.

A signed document is its content followed by one signature block (`seal`). The block carries the content's digest,
who signed and when, and the public key; the signature covers all of those, so neither the content nor the block can
change unseen. `verify` needs nothing but the file (and, to trust the key, this portal's or a given public key).

The private key comes from `RACKPILOT_SIGNING_KEY` (a base64 Ed25519 seed; set it on every host of a multi-host
install) or is generated on first use into `RACKPILOT_VAR_DIR/signing_key`, kept like the embedded secret key.
"""

import base64
import hashlib
import json
import os
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

# The block ends an HTML file as a comment, so the file still opens in any browser.
BLOCK_START = b"\n<!-- rackpilot-signature "
BLOCK_END = b" -->\n"


class SignatureError(Exception):
    """A document that is not signed, or whose signature block cannot be read."""


@dataclass(frozen=True)
class Verification:
    intact: bool
    reason: str
    signed_by: str = ""
    signed_at: str = ""
    fingerprint: str = ""
    trusted_key: bool = False


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def private_key() -> Ed25519PrivateKey:
    seed = settings.RACKPILOT_SIGNING_KEY
    if not seed:
        key_file = settings.VAR_DIR / "signing_key"
        if not key_file.exists():
            settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
            # O_EXCL: two processes signing their first report at once keep one key, not the last one written.
            try:
                descriptor = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                pass
            else:
                with os.fdopen(descriptor, "w") as handle:
                    handle.write(_b64(os.urandom(32)))
        seed = key_file.read_text().strip()
    try:
        return Ed25519PrivateKey.from_private_bytes(base64.b64decode(seed, validate=True))
    except ValueError:
        raise ImproperlyConfigured("RACKPILOT_SIGNING_KEY must be a base64-encoded 32-byte Ed25519 seed") from None


def public_key_b64() -> str:
    return _b64(_raw_public(private_key().public_key()))


def fingerprint(public_key_b64_text: str) -> str:
    """A short name for a public key, as people compare them: SHA256:<first 16 bytes of its digest, base64>."""
    digest = hashlib.sha256(base64.b64decode(public_key_b64_text)).digest()
    return "SHA256:" + base64.b64encode(digest[:16]).decode().rstrip("=")


def _statement(claims: dict) -> bytes:
    return json.dumps(claims, sort_keys=True, separators=(",", ":")).encode()


def seal(content: bytes, *, signed_by: str) -> bytes:
    """`content` with its signature block appended."""
    key = private_key()
    claims = {
        "algorithm": "Ed25519",
        "sha256": hashlib.sha256(content).hexdigest(),
        "signed_by": signed_by,
        "signed_at": timezone.now().isoformat(timespec="seconds"),
        "public_key": _b64(_raw_public(key.public_key())),
    }
    block = {**claims, "signature": _b64(key.sign(_statement(claims)))}
    return content + BLOCK_START + json.dumps(block, sort_keys=True).encode() + BLOCK_END


def verify(document: bytes, *, trusted_keys: tuple[str, ...] = ()) -> Verification:
    """Whether `document` is exactly what was signed, by whom, and whether the key is one of `trusted_keys`."""
    start = document.rfind(BLOCK_START)
    if start < 0 or not document.endswith(BLOCK_END):
        raise SignatureError("the file has no Rackpilot signature block at its end")
    content, raw_block = document[:start], document[start + len(BLOCK_START) : -len(BLOCK_END)]
    try:
        block = json.loads(raw_block)
        signature = base64.b64decode(block.pop("signature"), validate=True)
        public = Ed25519PublicKey.from_public_bytes(base64.b64decode(block["public_key"], validate=True))
        digest = block["sha256"]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise SignatureError("the signature block cannot be read") from None
    who = {
        "signed_by": str(block.get("signed_by", "")),
        "signed_at": str(block.get("signed_at", "")),
        "fingerprint": fingerprint(block["public_key"]),
        "trusted_key": block["public_key"] in trusted_keys,
    }
    try:
        public.verify(signature, _statement(block))
    except InvalidSignature:
        return Verification(False, "the signature does not match its block (the block was edited)", **who)
    if hashlib.sha256(content).hexdigest() != digest:
        return Verification(False, "the content changed after it was signed (its SHA-256 differs)", **who)
    return Verification(True, "intact", **who)
