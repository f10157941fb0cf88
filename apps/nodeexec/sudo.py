"""Non-root logins: the catalogue's root commands run as `sudo -n -- <argv>`, and a sudo that wants a password
fails the cell with what to do about it instead of hanging or failing with sudo's terse line."""

from apps.nodeexec.base import CommandResult, OutputCollector
from apps.nodeexec.catalogue import needs_root

# sudo -n prints "sudo: a password is required" and exits 1 when the sudoers rule is not NOPASSWD.
_PASSWORD_REQUIRED = b"a password is required"


def sudo_argv(argv: list[str]) -> list[str]:
    return ["sudo", "-n", "--", *argv]


def sudo_wanted_password(result: CommandResult) -> bool:
    return result.exit_code == 1 and _PASSWORD_REQUIRED in result.stderr.lower()


def password_message(username: str, hostname: str) -> str:
    return (
        f"sudo needs a password for {username} on {hostname}: allow these commands without a password (NOPASSWD) "
        "or log in as root"
    )


class SudoSession:
    """Wraps a session: commands the catalogue marks `root=True` go through `sudo -n`, the others run as they are."""

    def __init__(self, session, *, username: str, hostname: str):
        self.session, self.username, self.hostname = session, username, hostname

    async def run(self, argv, *, timeout, collector: OutputCollector, cancel, grace):
        if not needs_root(list(argv)):
            return await self.session.run(argv, timeout=timeout, collector=collector, cancel=cancel, grace=grace)
        result = await self.session.run(
            sudo_argv(list(argv)), timeout=timeout, collector=collector, cancel=cancel, grace=grace
        )
        if sudo_wanted_password(result):
            result.error = password_message(self.username, self.hostname)
        return result

    async def close(self) -> None:
        await self.session.close()
