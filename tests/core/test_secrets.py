"""Secrets at rest: Fernet tokens under RACKPILOT_SECRETS_KEY, rotation (MultiFernet), errors that quote nothing."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from apps.core import secrets

# The embedded wiring generates its keys; the services wiring must be given them (wirings).
pytestmark = pytest.mark.wirings

PLAINTEXT = "-----BEGIN OPENSSH PRIVATE KEY-----\nnot-really-a-key-but-secret\n-----END OPENSSH PRIVATE KEY-----\n"


def test_a_secret_round_trips_and_the_token_is_not_the_plaintext():
    token = secrets.encrypt(PLAINTEXT)
    assert "not-really-a-key" not in token and PLAINTEXT not in token
    assert secrets.decrypt(token) == PLAINTEXT
    assert secrets.encrypt(PLAINTEXT) != token  # a fresh IV every time: equal secrets do not show as equal columns


def test_rotation_keeps_old_tokens_readable_and_moves_them_to_the_new_key(settings):
    old, new = secrets.generate_key(), secrets.generate_key()
    settings.RACKPILOT_SECRETS_KEYS = [old]
    token = secrets.encrypt(PLAINTEXT)
    settings.RACKPILOT_SECRETS_KEYS = [new, old]
    assert secrets.decrypt(token) == PLAINTEXT
    rotated = secrets.rotate(token)
    settings.RACKPILOT_SECRETS_KEYS = [new]
    assert secrets.decrypt(rotated) == PLAINTEXT
    with pytest.raises(secrets.SecretError, match="cannot be decrypted") as caught:
        secrets.decrypt(token)
    assert "not-really-a-key" not in str(caught.value)


def test_a_malformed_key_is_a_configuration_error_that_does_not_echo_it(settings):
    settings.RACKPILOT_SECRETS_KEYS = ["short-and-wrong"]
    with pytest.raises(ImproperlyConfigured, match="RACKPILOT_SECRETS_KEY must be Fernet keys") as caught:
        secrets.encrypt("x")
    assert "short-and-wrong" not in str(caught.value)


def test_the_embedded_wiring_keeps_a_generated_key_under_var(tmp_path):
    from tests.core.test_configuration import _manage

    script = "from django.conf import settings; print(settings.RACKPILOT_SECRETS_KEYS[0])"
    first = _manage("shell", "-c", script, env_overrides={"RACKPILOT_VAR_DIR": str(tmp_path)}, embedded=True)
    assert first.returncode == 0, first.stderr
    stored = (tmp_path / "secrets_key").read_text().strip()
    assert first.stdout.strip().splitlines()[-1] == stored and (tmp_path / "secrets_key").stat().st_mode & 0o077 == 0
    again = _manage("shell", "-c", script, env_overrides={"RACKPILOT_VAR_DIR": str(tmp_path)}, embedded=True)
    assert again.stdout.strip().splitlines()[-1] == stored
