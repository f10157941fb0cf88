"""manage.py verify_report FILE: is a downloaded report exactly what this portal signed, and who signed it?"""

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.core import signing


class Command(BaseCommand):
    help = (
        "Check a signed report (e.g. the acceptance report's download): its SHA-256 and Ed25519 signature, and whether "
        "the signing key is this portal's (or one given with --public-key). Exits 0 only if intact and trusted."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="the downloaded report")
        parser.add_argument(
            "--public-key",
            action="append",
            default=[],
            help="a base64 Ed25519 public key to trust besides this portal's own (repeatable)",
        )

    def handle(self, *args, **options):
        path = Path(options["file"])
        try:
            document = path.read_bytes()
        except OSError as error:
            raise CommandError(f"{path}: cannot read it ({error.strerror})") from None
        trusted = (signing.public_key_b64(), *options["public_key"])
        try:
            result = signing.verify(document, trusted_keys=trusted)
        except signing.SignatureError as error:
            raise CommandError(f"{path}: {error}") from None
        signer = f"signed by {result.signed_by or 'nobody named'} at {result.signed_at} with key {result.fingerprint}"
        if not result.intact:
            self.stderr.write(f"{path}: NOT intact: {result.reason}; the block says {signer}")
            sys.exit(1)
        if not result.trusted_key:
            self.stderr.write(f"{path}: intact but {signer}, which is not this portal's key nor one given")
            sys.exit(1)
        self.stdout.write(f"{path}: intact, {signer}")
