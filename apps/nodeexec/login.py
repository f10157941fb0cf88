"""How to log in to one node over SSH when it differs from the worker's default (RACKPILOT_SSH_USER / _KEY).

Plain values the executor reads from the inventory's access profiles (apps.inventory.models.SshAccess) and puts in
each NodeTarget: nodeexec never imports the inventory. The private key is the decrypted OpenSSH text; it is kept
out of every repr, so a logged target or traceback never shows it.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class JumpHost:
    """A bastion the node is reached through (ProxyJump); its host key is verified like a node's, never skipped."""

    host: str
    port: int = 22
    username: str = ""  # empty: the node's login user
    trusted_keys: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.host}:{self.port}" if self.port != 22 else self.host


@dataclass(frozen=True)
class SshLogin:
    username: str
    private_key: str = field(default="", repr=False)  # empty: the worker's RACKPILOT_SSH_KEY
    jump: JumpHost | None = None
    sudo: bool = False  # a non-root login runs the catalogue's root commands as `sudo -n <argv>`

    @property
    def uses_sudo(self) -> bool:
        return self.sudo and self.username != "root"
