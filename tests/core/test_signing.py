import base64
import os

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.core import signing


@pytest.fixture
def own_key(settings):
    settings.RACKPILOT_SIGNING_KEY = base64.b64encode(os.urandom(32)).decode()


def test_a_sealed_document_verifies_and_names_its_signer(own_key):
    sealed = signing.seal(b"<html>accepted: yes</html>", signed_by="alice")

    result = signing.verify(sealed, trusted_keys=(signing.public_key_b64(),))

    assert result.intact and result.trusted_key
    assert result.signed_by == "alice" and result.fingerprint.startswith("SHA256:")


@pytest.mark.parametrize("offset", [0, 10, 25])
def test_one_changed_byte_of_content_is_caught(own_key, offset):
    sealed = bytearray(signing.seal(b"<html>accepted: no, 3 failures</html>", signed_by="alice"))
    sealed[offset] ^= 0x01

    result = signing.verify(bytes(sealed))

    assert not result.intact and "content changed" in result.reason


def test_an_edited_signer_is_caught(own_key):
    sealed = signing.seal(b"<html></html>", signed_by="alice").replace(b'"alice"', b'"bobby"')

    result = signing.verify(sealed)

    assert not result.intact and "block was edited" in result.reason


def test_a_document_resealed_with_another_key_is_intact_but_not_trusted(own_key, settings):
    ours = signing.public_key_b64()
    settings.RACKPILOT_SIGNING_KEY = base64.b64encode(os.urandom(32)).decode()
    forged = signing.seal(b"<html>accepted: yes</html>", signed_by="alice")

    result = signing.verify(forged, trusted_keys=(ours,))

    assert result.intact and not result.trusted_key


def test_without_a_configured_key_one_is_generated_once_and_kept(settings, tmp_path):
    settings.RACKPILOT_SIGNING_KEY = None
    settings.VAR_DIR = tmp_path
    first = signing.public_key_b64()

    assert signing.public_key_b64() == first
    assert (tmp_path / "signing_key").stat().st_mode & 0o777 == 0o600


def test_verify_report_command(own_key, tmp_path, capsys):
    good = tmp_path / "report.html"
    good.write_bytes(signing.seal(b"<html>report</html>", signed_by="alice"))
    call_command("verify_report", str(good))
    assert "intact, signed by alice" in capsys.readouterr().out

    bad = tmp_path / "edited.html"
    bad.write_bytes(good.read_bytes().replace(b"report", b"rep0rt", 1))
    with pytest.raises(SystemExit) as exit_:
        call_command("verify_report", str(bad))
    assert exit_.value.code == 1 and "NOT intact" in capsys.readouterr().err

    unsigned = tmp_path / "plain.html"
    unsigned.write_bytes(b"<html></html>")
    with pytest.raises(CommandError, match="no Rackpilot signature block"):
        call_command("verify_report", str(unsigned))
    with pytest.raises(CommandError, match="cannot read it"):
        call_command("verify_report", str(tmp_path / "missing.html"))
