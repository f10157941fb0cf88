"""Which commands need root, matched on the catalogue's templates; what a non-root login with sudo sends."""

import asyncio

import apps.deployments.commands  # noqa: F401  (registers the writing commands)
from apps.nodeexec.base import CommandResult, OutputCollector
from apps.nodeexec.catalogue import CATALOGUE, build, needs_root
from apps.nodeexec.login import SshLogin
from apps.nodeexec.sudo import SudoSession


def test_the_writing_commands_and_dmidecode_need_root_the_readers_do_not():
    writers = ("set-mtu", "set-channels", "set-qos", "write-file", "apt-install", "daemon-reload")
    for name in ("dmidecode-product", *writers):
        assert CATALOGUE[name].root, name
    for name in ("uname", "hostname", "ip-link", "lscpu", "ethtool", "nvidia-smi-list", "read-file"):
        assert not CATALOGUE[name].root, name


def test_an_argv_is_matched_against_the_root_templates_with_their_patterns():
    assert needs_root(build("set-mtu", interface="eth0", number=9000))
    assert needs_root(["dmidecode", "-s", "system-product-name"])
    assert not needs_root(build("ethtool", interface="eth0"))
    assert not needs_root(["ip", "link", "set", "dev", "eth0;reboot", "mtu", "9000"])  # not the template filled in
    assert not needs_root(["dmidecode", "-s", "system-product-name", "-t", "memory"])


class _Recording:
    def __init__(self, result: CommandResult):
        self.result, self.argvs = result, []

    async def run(self, argv, *, timeout, collector, cancel, grace):
        self.argvs.append(list(argv))
        return self.result

    async def close(self):
        return None


def _run(session, argv):
    collector = OutputCollector(cap=1024)
    return asyncio.run(session.run(argv, timeout=5, collector=collector, cancel=asyncio.Event(), grace=1))


def test_only_root_commands_go_through_sudo_n_and_a_password_prompt_becomes_a_clear_error():
    inner = _Recording(CommandResult(exit_code=1, stderr=b"sudo: a password is required\n"))
    session = SudoSession(inner, username="ops", hostname="gpu01")
    result = _run(session, ["dmidecode", "-s", "system-product-name"])
    _run(session, ["uname", "-a"])
    assert inner.argvs == [["sudo", "-n", "--", "dmidecode", "-s", "system-product-name"], ["uname", "-a"]]
    assert result.error.startswith("sudo needs a password for ops on gpu01: allow these commands without a password")


def test_a_root_login_never_uses_sudo():
    assert not SshLogin(username="root", sudo=True).uses_sudo
    assert SshLogin(username="ops", sudo=True).uses_sudo
    assert "PRIVATE" not in repr(SshLogin(username="ops", private_key="-----BEGIN OPENSSH PRIVATE KEY-----"))
