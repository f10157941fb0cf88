"""A real OpenSSH sshd on 127.0.0.1 for tests and benches: its own host key, user key, config and plain user.

Runs as root (sshd needs it to switch users) and lets a dedicated account with /bin/sh log in by key only, so a
test measures SSH and not a heavy login shell. `StrictModes no` because the keys live in a temporary folder.
"""

import os
import shutil
import socket
import subprocess
from pathlib import Path

from tests.waits import listening, until

SSHD = "/usr/sbin/sshd"
TEST_USER = "rackpilot-test"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def ensure_user(name: str = TEST_USER) -> None:
    if subprocess.run(["id", name], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "-M", "-d", "/tmp", "-s", "/bin/sh", name], check=True)
        subprocess.run(["usermod", "-p", "*", name], check=True)


def keygen(path: Path) -> str:
    if path.exists():
        path.unlink()
        Path(f"{path}.pub").unlink(missing_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return " ".join(Path(f"{path}.pub").read_text().split()[:2])


class Sshd:
    def __init__(
        self,
        root: Path,
        *,
        listen: tuple[str, ...] = ("127.0.0.1", "127.0.0.2", "127.0.0.3"),
        port: int | None = None,
        log_level: str = "VERBOSE",
        extra_config: tuple[str, ...] = (),
    ):
        """`listen`: up to 16 loopback addresses, or ("0.0.0.0",) to answer every 127.x.y.z (logins are still
        only accepted from 127.0.0.0/8). `log_level` DEBUG1 also logs each forwarded (direct-tcpip) connection.
        `extra_config`: more sshd_config lines (e.g. `SetEnv PATH=...` for the test user's sessions)."""
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.listen = tuple(listen)
        self.port = port or free_port()
        self.user = TEST_USER
        self.client_key = self.root / "userkey"
        self.host_key_path = self.root / "hostkey"
        self.log = self.root / "sshd.log"
        self.process: subprocess.Popen | None = None
        self.host_key = ""
        self.log_level = log_level
        self.extra_config = tuple(extra_config)

    @staticmethod
    def available() -> bool:
        return os.path.exists(SSHD) and shutil.which("ssh-keygen") is not None and os.geteuid() == 0

    def start(self) -> "Sshd":
        ensure_user(self.user)
        Path("/run/sshd").mkdir(exist_ok=True)
        if not self.client_key.exists():
            keygen(self.client_key)
            (self.root / "authorized_keys").write_text(Path(f"{self.client_key}.pub").read_text())
            (self.root / "authorized_keys").chmod(0o644)
        if not self.host_key_path.exists():
            self.host_key = keygen(self.host_key_path)
        else:
            self.host_key = " ".join(Path(f"{self.host_key_path}.pub").read_text().split()[:2])
        os.chmod(self.root, 0o755)
        os.chmod(self.client_key, 0o644)  # the worker may run as another user in the benches
        (self.root / "sshd_config").write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    *[f"ListenAddress {address}" for address in self.listen],
                    f"HostKey {self.host_key_path}",
                    f"AuthorizedKeysFile {self.root}/authorized_keys",
                    f"PidFile {self.root}/sshd.pid",
                    f"AllowUsers {self.user}@127.0.0.0/8",
                    "PermitRootLogin no",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "UseDNS no",
                    "StrictModes no",
                    "MaxStartups 2000:30:4000",
                    "MaxSessions 64",
                    f"LogLevel {self.log_level}",
                    *self.extra_config,
                    "",
                ]
            )
        )
        self.process = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(self.root / "sshd_config")],
            stdout=subprocess.DEVNULL,
            stderr=open(self.log, "ab"),  # noqa: SIM115  (sshd keeps writing to it)
        )
        address = "127.0.0.1" if self.listen[0] == "0.0.0.0" else self.listen[0]
        try:
            until(lambda: listening(address, self.port), what="sshd", exited=lambda: self.process.poll() is not None)
        except RuntimeError as error:
            raise RuntimeError(f"{error}: {self.log.read_text()[-2000:]}") from None
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def new_host_key(self) -> str:
        """Restart with a freshly generated host key (as a reinstalled or impostor node would have)."""
        self.stop()
        self.host_key = keygen(self.host_key_path)
        self.start()
        return self.host_key

    def forwarded_to(self, address: str, port: int) -> int:
        """How many connections this sshd forwarded to address:port as a jump host (needs log_level DEBUG1)."""
        return self.log.read_text(errors="replace").count(f"target {address} port {port}")

    def accepted_logins(self) -> int:
        return self.log.read_text(errors="replace").count(f"Accepted publickey for {self.user}")
