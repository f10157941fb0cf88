"""Fan-out benchmark: `true` on N SSH "hosts" (127.0.x.y, one local sshd) through the project's ssh transport.

Prints wall time and client CPU per host for: a bare asyncssh loop (window 64, host keys checked, the floor), the
Rackpilot engine (a shell-check job, one shard run in this process as a worker would, everything recorded in the
database), and peers on the same hosts: ClusterShell's clush and Ansible (`-m command`, `-m raw`), both with
`-f 64` and host keys checked, installed by this script into var/bench-peers with pip.

Needs root (sshd switches to a plain test user with /bin/sh) and OpenSSH's sshd.
Usage: python bench/fanout.py [--hosts 100 500] [--no-peers]
"""

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PEERS = ROOT / "var" / "bench-peers"


def address(i: int) -> str:
    return f"127.0.{1 + i // 250}.{1 + i % 250}"


def setup_django(work: Path):
    os.environ["RACKPILOT_VAR_DIR"] = str(work)
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    os.environ.setdefault("RACKPILOT_LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


async def bare_loop(n: int, sshd) -> tuple[float, float, int]:
    import asyncssh

    known = asyncssh.import_known_hosts(f"* {sshd.host_key}\n")
    keys = asyncssh.load_keypairs([str(sshd.client_key)])
    sem = asyncio.Semaphore(64)

    async def one(i):
        async with (
            sem,
            asyncssh.connect(
                address(i),
                port=sshd.port,
                username=sshd.user,
                client_keys=keys,
                known_hosts=known,
                config=None,
                agent_path=None,
            ) as conn,
        ):
            return (await conn.run("true")).exit_status

    t, cpu = time.perf_counter(), time.process_time()
    results = await asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True)
    return time.perf_counter() - t, time.process_time() - cpu, sum(1 for r in results if r == 0)


def engine(n: int, sshd) -> tuple[float, float, int, int]:
    from django.conf import settings

    from apps.inventory.choices import HostKeyState
    from apps.inventory.hostkeys import fingerprint_of
    from apps.inventory.models import Node, SshHostKey
    from apps.jobs import executor, services
    from apps.jobs.choices import StepStatus
    from apps.jobs.models import JobStep

    settings.RACKPILOT_SSH_USER = sshd.user
    settings.RACKPILOT_SSH_KEY = str(sshd.client_key)
    settings.RACKPILOT_JOB_SHARD_SIZE = max(n, 256)
    services.enqueue = lambda job: None  # run the shard here, as the worker would
    Node.objects.all().delete()
    nodes = Node.objects.bulk_create(
        [Node(hostname=f"bench{i:04d}", management_ip=address(i), ssh_port=sshd.port) for i in range(n)]
    )
    nodes = list(Node.objects.order_by("hostname"))
    SshHostKey.objects.bulk_create(
        [
            SshHostKey(
                node=node,
                public_key=sshd.host_key,
                state=HostKeyState.TRUSTED,
                fingerprint=fingerprint_of(sshd.host_key),
            )
            for node in nodes
        ]
    )
    job = services.create_job(
        kind="shell-check",
        targets=services.TargetSpec(role="compute"),
        parameters={"commands": ["true"]},
        transport="ssh",
    )
    t, cpu = time.perf_counter(), time.process_time()
    executor.run_shard(job_public_id=str(job.public_id), index=0, worker="bench")
    wall, used = time.perf_counter() - t, time.process_time() - cpu
    job.refresh_from_db()
    ok = JobStep.objects.filter(job=job, status=StepStatus.SUCCEEDED).count()
    return wall, used, ok, job.last_seq


def install_peers() -> bool:
    if (PEERS / "bin" / "clush").exists() and (PEERS / "bin" / "ansible").exists():
        return True
    try:
        subprocess.run([sys.executable, "-m", "venv", str(PEERS)], check=True)
        subprocess.run(
            [str(PEERS / "bin" / "pip"), "install", "-q", "clustershell", "ansible-core"], check=True, timeout=600
        )
        return True
    except (subprocess.SubprocessError, OSError) as error:
        print(f"  (peers not installed: {error})")
        return False


def peers(n: int, sshd, work: Path) -> dict[str, tuple[float, int]]:
    known = work / "known_hosts"
    known.write_text("".join(f"[{address(i)}]:{sshd.port} {sshd.host_key}\n" for i in range(n)))
    key = work / "peer_key"  # OpenSSH refuses a private key others can read
    shutil.copy(sshd.client_key, key)
    key.chmod(0o600)
    ssh_config = work / "ssh_config"
    ssh_config.write_text(
        f"Host *\n  Port {sshd.port}\n  User {sshd.user}\n  IdentityFile {key}\n"
        f"  UserKnownHostsFile {known}\n  StrictHostKeyChecking yes\n  ControlMaster no\n  BatchMode yes\n"
        "  LogLevel ERROR\n"
    )
    hosts = [address(i) for i in range(n)]
    (work / "inventory.ini").write_text("[all]\n" + "\n".join(hosts) + "\n")
    (work / "clush.conf").write_text(
        f"[Main]\nfanout: 64\nconnect_timeout: 30\ncommand_timeout: 0\nssh_options: -F {ssh_config}\n"
    )
    env = dict(
        os.environ,
        CLUSTERSHELL_CFGDIR=str(work),
        ANSIBLE_SSH_ARGS=f"-F {ssh_config}",
        ANSIBLE_HOST_KEY_CHECKING="True",
        ANSIBLE_PIPELINING="True",
        ANSIBLE_PYTHON_INTERPRETER="auto_silent",
        ANSIBLE_STDOUT_CALLBACK="minimal",
        ANSIBLE_LOCAL_TEMP=str(work / "ansible-tmp"),
        ANSIBLE_REMOTE_TEMP="/tmp/.ansible-rackpilot-bench",
    )
    runs = {
        "clush -f 64": [
            str(PEERS / "bin" / "clush"),
            "-f",
            "64",
            "-o",
            f"-F {ssh_config}",
            "-w",
            ",".join(hosts),
            "true; echo ok",
        ],
        "ansible -m raw -f 64": [
            str(PEERS / "bin" / "ansible"),
            "all",
            "-i",
            str(work / "inventory.ini"),
            "-m",
            "raw",
            "-a",
            "true",
            "-f",
            "64",
        ],
        "ansible -m command -f 64": [
            str(PEERS / "bin" / "ansible"),
            "all",
            "-i",
            str(work / "inventory.ini"),
            "-m",
            "command",
            "-a",
            "true",
            "-f",
            "64",
        ],
    }
    results = {}
    for name, argv in runs.items():
        t = time.perf_counter()
        out = subprocess.run(argv, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t
        ok = (
            out.stdout.count(": ok")
            if name.startswith("clush")
            else out.stdout.count("CHANGED") + out.stdout.count("SUCCESS")
        )
        results[name] = (wall, ok)
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, nargs="+", default=[100, 500])
    parser.add_argument("--no-peers", action="store_true")
    args = parser.parse_args()
    from tests.nodeexec.sshd import Sshd

    if not Sshd.available():
        sys.exit("needs root and /usr/sbin/sshd")
    work = Path(tempfile.mkdtemp(prefix="rackpilot-fanout-"))
    os.chmod(work, 0o755)
    setup_django(work)
    sshd = Sshd(work / "sshd", listen=("0.0.0.0",)).start()
    have_peers = not args.no_peers and install_peers()
    print(f"fan-out of `true`, host keys checked, window 64, {os.cpu_count()} CPUs, sshd shared on this machine")
    try:
        for n in args.hosts:
            bare = asyncio.run(bare_loop(n, sshd))
            mine = engine(n, sshd)
            bare2 = asyncio.run(bare_loop(n, sshd))
            floor = min(bare[0], bare2[0])
            print(f"N={n}")
            print(
                f"  bare asyncssh loop : {bare[0]:6.2f} s / {bare2[0]:6.2f} s  ok={bare[2]}/{bare2[2]}  "
                f"client CPU {1e3 * bare[1] / n:.2f} / {1e3 * bare2[1] / n:.2f} ms/host"
            )
            print(
                f"  rackpilot engine   : {mine[0]:6.2f} s  ok={mine[2]}  client CPU {1e3 * mine[1] / n:.2f} ms/host  "
                f"({mine[3]} events recorded)  = {mine[0] / floor:.2f}x the bare loop "
                f"(target <= 1.10x, <= 7 ms/host)"
            )
            if have_peers:
                for name, (wall, ok) in peers(n, sshd, work).items():
                    print(f"  {name:<25}: {wall:6.2f} s  ok={ok}  rackpilot is {wall / mine[0]:.1f}x faster")
    finally:
        sshd.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
