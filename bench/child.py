"""What the benches that measure one size per process share: a throwaway SQLite database per run, and Django set
up inside the child."""

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_on_fresh_sqlite(script: str, name: str, args: list[str]) -> dict:
    """Run `script --child ARGS` on a new SQLite database under var/bench/NAME/; its last stdout line is JSON."""
    var_dir = ROOT / "var" / "bench" / name
    shutil.rmtree(var_dir, ignore_errors=True)
    var_dir.mkdir(parents=True)
    env = {**os.environ, "RACKPILOT_VAR_DIR": str(var_dir), "RACKPILOT_LOG_LEVEL": "WARNING"}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    command = [sys.executable, script, "--child", *args]
    child = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT)
    if child.returncode:  # say why: its traceback, else the bench's own complaint
        sys.stderr.write(child.stderr[-4000:])
        child.check_returncode()
    return json.loads(child.stdout.strip().splitlines()[-1])


def each_size(script: str, description: str, default_sizes: list[int], measure, header: str):
    """The bench's rows, one per --sizes value, each measured by measure(size) in a child process on a fresh
    database (prints `header` first). Run as that child (--child SIZE), it prints measure(SIZE) as JSON instead and
    yields nothing."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=default_sizes)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child)))
        return
    print(header)
    for size in args.sizes:
        yield run_on_fresh_sqlite(script, f"{Path(script).stem}-{size}", [str(size)])


def setup_django() -> None:
    """In the child: Django on the settings of the environment run_on_fresh_sqlite prepared."""
    import django

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    django.setup()


class CommandCounter:
    """The simulator behind the sim transport, counting the commands it answers (in the sessions it opens)."""

    def __init__(self, inner):
        self.inner, self.calls = inner, 0

    def run(self, node, argv):
        return self.session(node).run(argv)

    def session(self, node, shared=None):
        return _CountedSession(self, self.inner.session(node, shared))

    def shared_reads(self):
        return self.inner.shared_reads()


class _CountedSession:
    def __init__(self, counter: CommandCounter, opened):
        self.counter, self.opened = counter, opened

    def run(self, argv):
        self.counter.calls += 1
        return self.opened.run(argv)


def demo_cluster_on_sim(size: int, rack_scale_racks: int = 0) -> CommandCounter:
    """In the child: the demo cluster's shape at `size` compute nodes (and that many GB200 NVL72 racks) on the fresh
    database, jobs never queued (the bench runs their shards with run_shards_here), and the simulator counting its
    commands."""
    from django.core.management import call_command

    from apps.inventory.demo import ClusterShape, load_cluster
    from apps.jobs import services as job_services
    from apps.nodeexec import sim

    call_command("migrate", verbosity=0)
    load_cluster(ClusterShape(compute_nodes=size, rack_scale_racks=rack_scale_racks))
    job_services.enqueue = lambda job: None
    counter = CommandCounter(sim.get_simulator())
    sim.register_simulator(counter)
    return counter


def run_shards_here(job) -> None:
    """Run every shard of the job in this process, as a worker would."""
    from apps.jobs import executor

    for shard in job.shards.order_by("index"):
        executor.run_shard(job_public_id=str(job.public_id), index=shard.index, worker="bench")
