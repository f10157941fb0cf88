import os
import shutil
import tempfile

import pytest

from tests.nodeexec.sshd import Sshd


def require_sshd():
    if not Sshd.available():
        message = "needs root and OpenSSH's sshd (apt-get install openssh-server)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture
def sshd():
    require_sshd()
    # Not under pytest's tmp_path: its parents are private to root, and the test user must read authorized_keys.
    root = tempfile.mkdtemp(prefix="rackpilot-sshd-")
    server = Sshd(root).start()
    yield server
    server.stop()
    shutil.rmtree(root, ignore_errors=True)
