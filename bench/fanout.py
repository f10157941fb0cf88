"""Fan-out benchmark: `true` on N SSH "hosts" (127.0.x.y, one local sshd) through the project's ssh transport.

Prints wall time and client CPU per host for: a bare asyncssh loop (window 64, host keys checked, the floor), the
Rackpilot engine (a shell-check job, one shard run in this process as a worker would, everything recorded in the
database), and peers on the same hosts: ClusterShell's clush, Ansible (`-m command`, `-m raw`; both installed by
this script into var/bench-peers with pip) and pdsh (Debian package, if installed), all `-f 64`, host keys checked,
no connection sharing. The machine is shared: the bare loop and the engine are alternated `--rounds` times and the
best run of each is compared (every run is printed); peers run once.

Needs root (sshd switches to a plain test user with /bin/sh) and OpenSSH's sshd.
Usage: python bench/fanout.py [--hosts 100 500] [--rounds 3] [--no-peers]
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

from apps.core.text import counted  # noqa: E402  (after the path that finds it)

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
    from apps.jobs.models import JobEvent, JobStep

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
    seqs = list(JobEvent.objects.filter(job=job).order_by("seq").values_list("seq", flat=True))
    if seqs != list(range(1, job.last_seq + 1)):
        raise SystemExit(f"engine: events are not gapless ({len(seqs)} rows, last_seq {job.last_seq})")
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
    if shutil.which("pdsh"):
        runs["pdsh -R ssh -f 64"] = ["pdsh", "-R", "ssh", "-f", "64", "-w", ",".join(hosts), "true; echo ok"]
    results = {}
    for name, argv in runs.items():
        t = time.perf_counter()
        out = subprocess.run(argv, env=dict(env, PDSH_SSH_ARGS=f"-F {ssh_config}"), capture_output=True, text=True)
        wall = time.perf_counter() - t
        ok = (
            out.stdout.count(": ok")
            if name.startswith(("clush", "pdsh"))
            else out.stdout.count("CHANGED") + out.stdout.count("SUCCESS")
        )
        if ok < n:
            error = (out.stderr or out.stdout).strip().splitlines()
            print(f"  ({name}: {counted(n - ok, 'host')} failed, rc={out.returncode}: {error[-1] if error else '?'})")
        results[name] = (wall, ok)
    return results


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, nargs="+", default=[100, 500])
    parser.add_argument("--rounds", type=int, default=3, help="bare loop and engine runs, alternated; best is kept")
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
    print(
        f"fan-out of `true`, host keys checked, window 64, {os.cpu_count()} CPUs, sshd on this machine; "
        f"bare loop and engine alternated {args.rounds}x per N, best of each kept (all runs listed); {load()}"
    )
    try:
        for n in args.hosts:
            bares, mines = [], []
            for _ in range(args.rounds):
                bares.append(asyncio.run(bare_loop(n, sshd)))
                mines.append(engine(n, sshd))
            bare = min(bares)
            mine = min(mines)
            cpu_bare = min(run[1] for run in bares) / n
            cpu_mine = min(run[1] for run in mines) / n
            print(f"N={n}  ({load()})")
            print(
                f"  bare asyncssh loop       : {bare[0]:6.2f} s  client CPU {1e3 * cpu_bare:.2f} ms/host  "
                f"ok={min(run[2] for run in bares)}/{n}   runs: "
                + ", ".join(f"{run[0]:.2f} s/{1e3 * run[1] / n:.2f} ms" for run in bares)
            )
            print(
                f"  rackpilot engine         : {mine[0]:6.2f} s  client CPU {1e3 * cpu_mine:.2f} ms/host  "
                f"ok={min(run[2] for run in mines)}/{n}   runs: "
                + ", ".join(f"{run[0]:.2f} s/{1e3 * run[1] / n:.2f} ms" for run in mines)
                + f"   ({mine[3]} events recorded, gapless)"
            )
            wall_ok = mine[0] <= 1.10 * bare[0]
            cpu_ok = cpu_mine <= 0.007
            print(
                f"  engine / bare loop       : wall {mine[0] / bare[0]:.2f}x (target <= 1.10x: "
                f"{'met' if wall_ok else 'NOT met'}), client CPU {1e3 * cpu_mine:.2f} ms/host "
                f"(target <= 7: {'met' if cpu_ok else 'NOT met'}), {cpu_mine / cpu_bare:.2f}x the bare loop's"
            )
            if have_peers:
                for name, (wall, ok) in peers(n, sshd, work).items():
                    print(
                        f"  {name:<25}: {wall:6.2f} s  ok={ok}/{n}  = {wall / bare[0]:.1f}x the bare loop, "
                        f"rackpilot is {wall / mine[0]:.1f}x faster"
                    )
    finally:
        sshd.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"done ({load()})")


if __name__ == "__main__":
    main()
