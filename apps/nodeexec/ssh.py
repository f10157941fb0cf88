"""The ssh transport (asyncssh): one connection per node for all of a job's steps, host keys from the inventory.

Host keys are checked against the node's *trusted* SshHostKey rows only (an asyncssh known_hosts object built from
them; revoked keys are listed as revoked). Verification is never turned off. A key we do not trust fails the
connection with its SHA256 fingerprint so an operator can approve it; a node that has a trusted key but presents
another fails loudly as a changed key, and nothing is ever trusted automatically.

The login is the worker's (RACKPILOT_SSH_USER / RACKPILOT_SSH_KEY) unless the target carries its own
(NodeTarget.login: user, key, jump host, sudo). A jump host is reached first and its key checked against the
login's trusted jump keys the same way (never off); the node is then connected through it (`tunnel=`), and one jump
connection serves every node behind it until aclose(). Sudo logins wrap the session (apps/nodeexec/sudo.py).

Each remote command runs as `printf <marker> $$; exec <quoted argv>` under the login shell that sshd starts in a
new session, so the command's pid is its process group id; cancel and timeouts `kill -TERM -- -<pgid>` over a
second channel of the same connection, then KILL after a grace period. Given a marker, the command first exports
RACKPILOT_JOB=<marker>, which its children inherit: catalogue.END_MARKED finds them by it on the node.
"""

import asyncio
import contextlib
import logging
import time

import asyncssh

from apps.nodeexec.base import (
    MARKER_ENV,
    STDERR,
    STDOUT,
    CommandResult,
    NodeTarget,
    OutputCollector,
    TransportError,
    pump_lines,
    wait_or_cancel,
)
from apps.nodeexec.catalogue import shell_join
from apps.nodeexec.local import check_marker
from apps.nodeexec.login import JumpHost, SshLogin
from apps.nodeexec.sudo import SudoSession

PID_MARKER = b"\x1erackpilot-pgid "

# asyncssh logs several INFO lines per connection: at 500 nodes that is noise, and CPU. Keep its warnings.
if logging.getLogger("asyncssh").level == logging.NOTSET:
    logging.getLogger("asyncssh").setLevel(logging.WARNING)


def _public_key_line(key: asyncssh.SSHKey) -> str:
    return " ".join(key.export_public_key("openssh").decode().split()[:2])


class _HostKeyWitness(asyncssh.SSHClient):
    """Called by asyncssh only for a key that known_hosts does not trust: remember it and refuse it."""

    def __init__(self):
        self.presented: asyncssh.SSHKey | None = None

    def validate_host_public_key(self, host, addr, port, key) -> bool:
        self.presented = key
        return False


def known_hosts_for(target: NodeTarget) -> asyncssh.SSHKnownHosts:
    lines = [f"* {key}" for key in target.trusted_keys] + [f"@revoked * {key}" for key in target.revoked_keys]
    return asyncssh.import_known_hosts("\n".join(lines) + "\n")


class SshSession:
    def __init__(self, connection: asyncssh.SSHClientConnection, marker: str | None = None):
        self.connection = connection
        # The marker matches MARKER_PATTERN (no shell metacharacters); it is quoted all the same.
        self.prefix = f"{MARKER_ENV}={shell_join([marker])}; export {MARKER_ENV}; " if marker else ""

    async def run(self, argv, *, timeout, collector: OutputCollector, cancel: asyncio.Event, grace: float):
        started = time.monotonic()
        result = CommandResult()
        command = self.prefix + "printf '\\036rackpilot-pgid %s\\n' \"$$\"; exec " + shell_join(argv)
        try:
            process = await self.connection.create_process(command, encoding=None, stdin=asyncssh.DEVNULL)
        except (asyncssh.Error, OSError) as error:
            result.error = f"ssh: {error}"
            return collector.fill(result)
        pgid: list[int] = []

        async def read_stdout():
            first = await process.stdout.readline()
            if first.startswith(PID_MARKER):
                with contextlib.suppress(ValueError):
                    pgid.append(int(first[len(PID_MARKER) :].strip()))
            else:
                collector.feed(STDOUT, first)
            await pump_lines(process.stdout, STDOUT, collector)

        async def finish():
            await asyncio.gather(read_stdout(), pump_lines(process.stderr, STDERR, collector))
            await process.wait_closed()

        outcome = await wait_or_cancel(finish(), timeout=timeout, cancel=cancel)
        if outcome != "done":
            result.timed_out, result.canceled = outcome == "timeout", outcome == "cancel"
            await self._kill_group(process, pgid[0] if pgid else None, grace)
        else:
            result.exit_code = process.exit_status
            if process.exit_signal:
                result.signal = process.exit_signal[0]
                result.exit_code = None
        result.duration = time.monotonic() - started
        return collector.fill(result)

    async def _kill_group(self, process, pgid: int | None, grace: float) -> None:
        if pgid is not None:
            for sig, wait in (("TERM", grace), ("KILL", 5.0)):
                with contextlib.suppress(asyncssh.Error, OSError):
                    await self.connection.run(
                        f"kill -s {sig} -- -{pgid} 2>/dev/null || kill -s {sig} {pgid}", check=False
                    )
                try:
                    await asyncio.wait_for(process.wait_closed(), wait)
                    break
                except TimeoutError:
                    continue
        process.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(process.wait_closed(), 1)

    async def close(self) -> None:
        self.connection.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.connection.wait_closed(), 2)


def _failed(future: asyncio.Future) -> bool:
    return future.cancelled() or future.exception() is not None


class SshTransport:
    """Opens connections as `username` with the worker's client key(s), or as the node's own login (NodeTarget.login:
    user, key, jump host, sudo) where the inventory gives one. One connection to a jump host is shared by every
    node behind it for the transport's life (one shard), and closed by aclose()."""

    name = "ssh"

    def __init__(
        self, *, username: str, client_keys: list[str], connect_timeout: float = 20.0, marker: str | None = None
    ):
        self.marker = check_marker(marker)
        self.username = username
        self.client_keys = asyncssh.load_keypairs(client_keys) if client_keys else []
        self.connect_timeout = connect_timeout
        # One known_hosts object per distinct set of keys (most nodes of a cluster share one): parsing the keys
        # again for every connection is CPU the fan-out does not need to spend.
        self._known_hosts: dict[tuple[tuple[str, ...], tuple[str, ...]], asyncssh.SSHKnownHosts] = {}
        self._login_keys: dict[str, list[asyncssh.SSHKey]] = {}
        self._jumps: dict[tuple, asyncio.Future] = {}

    def known_hosts(self, target: NodeTarget) -> asyncssh.SSHKnownHosts:
        key = (target.trusted_keys, target.revoked_keys)
        known = self._known_hosts.get(key)
        if known is None:
            known = self._known_hosts[key] = known_hosts_for(target)
        return known

    def _client_keys(self, login: SshLogin | None) -> list:
        if login is None or not login.private_key:
            return self.client_keys
        keys = self._login_keys.get(login.private_key)
        if keys is None:
            try:
                keys = [asyncssh.import_private_key(login.private_key)]
            except (asyncssh.KeyImportError, ValueError):
                # Never quote the key: the message says which login it belongs to, nothing more.
                raise TransportError(f"the private key stored for {login.username} cannot be read") from None
            self._login_keys[login.private_key] = keys
        return keys

    def _connect_options(self, username: str, client_keys: list) -> dict:
        return {
            "username": username,
            "client_keys": client_keys,
            "connect_timeout": self.connect_timeout,
            "config": None,
            "agent_path": None,
            "password": None,
            "kbdint_auth": False,
            "gss_host": None,
            "x509_trusted_certs": None,
        }

    async def _jump_connection(self, jump: JumpHost, username: str, client_keys: list):
        """The shared connection to `jump` (opened on first use; a closed or failed one is opened again)."""
        username = jump.username or username
        key = (jump.host, jump.port, username, jump.trusted_keys, tuple(id(k) for k in client_keys))
        pending = self._jumps.get(key)
        if pending is not None and pending.done() and (_failed(pending) or pending.result().is_closed()):
            pending = None
        if pending is None:
            pending = self._jumps[key] = asyncio.ensure_future(self._open_jump(jump, username, client_keys))
        try:
            return await asyncio.shield(pending)
        except TransportError:
            if self._jumps.get(key) is pending:
                del self._jumps[key]
            raise

    async def _open_jump(self, jump: JumpHost, username: str, client_keys: list):
        witness = _HostKeyWitness()
        known = asyncssh.import_known_hosts("".join(f"* {key}\n" for key in jump.trusted_keys))
        try:
            return await asyncssh.connect(
                jump.host,
                port=jump.port,
                known_hosts=known,
                client_factory=lambda: witness,
                **self._connect_options(username, client_keys),
            )
        except asyncssh.HostKeyNotVerifiable as error:
            key = witness.presented
            if key is None:
                raise TransportError(f"jump host {jump.label}: host key refused: {error}") from None
            fingerprint = key.get_fingerprint("sha256")
            if jump.trusted_keys:
                message = (
                    f"JUMP HOST KEY CHANGED: jump host {jump.label} presented {fingerprint}, which is none of its "
                    "trusted keys; nothing was trusted automatically and no node behind it was contacted."
                )
            else:
                message = (
                    f"jump host {jump.label}: unknown host key {fingerprint}: add it to the access profile's jump "
                    "host keys once you have checked it; no node behind it was contacted."
                )
            # No host_key/fingerprint on the error: they would be offered as the *node's* key for approval.
            raise TransportError(message) from None
        except (asyncssh.Error, OSError, TimeoutError) as error:
            reason = str(error) or type(error).__name__
            raise TransportError(f"ssh to jump host {jump.label} failed: {reason}") from None

    async def open(self, target: NodeTarget):
        login = target.login
        username = login.username if login is not None else self.username
        client_keys = self._client_keys(login)
        tunnel = None
        if login is not None and login.jump is not None:
            tunnel = await self._jump_connection(login.jump, username, client_keys)
        witness = _HostKeyWitness()
        try:
            connection = await asyncssh.connect(
                target.address,
                port=target.port,
                known_hosts=self.known_hosts(target),
                client_factory=lambda: witness,
                tunnel=tunnel,
                **self._connect_options(username, client_keys),
            )
        except asyncssh.HostKeyNotVerifiable as error:
            key = witness.presented
            if key is None:
                raise TransportError(f"host key refused: {error}") from None
            fingerprint = key.get_fingerprint("sha256")
            if target.trusted_keys:
                message = (
                    f"HOST KEY CHANGED: {target.hostname} presented {fingerprint}, which is not its trusted key; "
                    "nothing was trusted automatically. Check the node before approving the new key."
                )
            else:
                message = f"unknown host key {fingerprint}: an operator can trust it on the node's page"
            raise TransportError(message, host_key=_public_key_line(key), fingerprint=fingerprint) from None
        except (asyncssh.Error, OSError, TimeoutError) as error:
            reason = str(error) or type(error).__name__
            via = f" through jump host {login.jump.label}" if tunnel is not None else ""
            raise TransportError(f"ssh to {target.address}:{target.port}{via} failed: {reason}") from None
        session = SshSession(connection, self.marker)
        if login is not None and login.uses_sudo:
            return SudoSession(session, username=username, hostname=target.hostname)
        return session

    async def aclose(self) -> None:
        jumps, self._jumps = list(self._jumps.values()), {}
        for pending in jumps:
            if pending.done() and not _failed(pending):
                connection = pending.result()
                connection.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(connection.wait_closed(), 2)
            elif not pending.done():
                pending.cancel()
