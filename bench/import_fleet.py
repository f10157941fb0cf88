"""A whole fleet's inventory imported as a background job: the demo grown to N compute nodes (2,048 by default: 16,384
H200 GPUs, the three-tier fabric, and the demo's GB200 NVL72 rack) exported as one document (every site, rack, node,
GPU, NIC, switch, cable, firmware row, volume and the rack-scale parts), then imported into an empty inventory by an
`inventory-import` job that a Celery job worker process runs (`celery -A portal worker -Q jobs`, the queue the
import's task goes to), as a file uploaded on the import page or to the import API is.

Prints the document's size and the export's time; the job's wall time from its creation (the upload) to its end, the
rows it wrote a second, how many progress events the job page could follow and the longest gap between two, the
worker's peak RSS, and that the imported inventory counts what the exported one did. There is no target in the issue
but "as a background job" (the request returns at once and the page follows the progress); the figure says how long
an operator waits for the whole fleet.

Usage: DATABASE_URL=postgres://… REDIS_URL=redis://…/8 python bench/import_fleet.py [--nodes 2048] [--format yaml]
       [--keep]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from inprocess import BenchDatabase, machine_line  # noqa: E402  (bench/ is the script's folder)
from scaleout import shared_services_environment, start_worker, stop, wait_ready  # noqa: E402

COUNTED = ("Rack", "Node", "Gpu", "Nic", "Switch", "Cable", "Firmware", "Volume", "LeakSensor")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2048, help="compute nodes (8 GPUs each); default 2048")
    parser.add_argument("--format", choices=["yaml", "json"], default="yaml", dest="fmt")
    parser.add_argument("--keep", action="store_true", help="keep the source database (a later --keep run reuses it)")
    parser.add_argument("--target", nargs=2, metavar=("FILE", "COUNTS"), help=argparse.SUPPRESS)
    return parser.parse_args()


def inventory_counts() -> dict[str, int]:
    from django.apps import apps

    return {name: apps.get_model("inventory", name).objects.count() for name in COUNTED}


def export_fleet(nodes: int, fmt: str, keep: bool, out: Path) -> dict[str, int]:
    """Grow the demo in a database of its own (kept with --keep) and write its whole inventory to `out`."""
    with BenchDatabase(f"import_fleet_source_{nodes}", keep=keep, reuse=True) as database:
        import django

        django.setup()
        from django.core.management import call_command

        from apps.inventory.transfer import export_inventory

        call_command("migrate", verbosity=0)
        if not database.reused:
            print(f"Growing the demo to {nodes:,} compute nodes in {database.label} ...", flush=True)
            started = time.perf_counter()
            call_command("load_demo", verbosity=0)
            call_command("load_demo", "--nodes", str(nodes), verbosity=0)
            print(f"Grown in {time.perf_counter() - started:.1f} s", flush=True)
        started = time.perf_counter()
        text = export_inventory(fmt=fmt)
        seconds = time.perf_counter() - started
        out.write_text(text)
        counts = inventory_counts()
        print(
            f"Exported {len(text) / 2**20:.1f} MiB of {fmt} in {seconds:.1f} s: "
            + ", ".join(f"{count:,} {name}" for name, count in counts.items()),
            flush=True,
        )
        return counts


def peak_rss_mib(process) -> float:
    """The highest resident set of the worker's processes (the main one and its pool child), from /proc."""
    peak = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            if os.getpgid(int(status.parent.name)) == process.pid:
                peak = max(peak, int(fields.get("VmHWM", "0 kB").split()[0]))
        except (OSError, ValueError):
            continue
    return peak / 1024


def import_as_a_job(path: Path, expected: dict[str, int]) -> None:
    """In a process of its own, on an empty database: upload the file as the page does and let a worker import it."""
    with BenchDatabase("import_fleet_target") as database:
        import django

        django.setup()
        from django.core.management import call_command

        from apps.jobs.imports import start_inventory_import
        from apps.jobs.models import Job, JobEvent

        call_command("migrate", verbosity=0)
        logs = Path(tempfile.mkdtemp(prefix="rackpilot-import-fleet-"))
        worker = start_worker("import", logs)
        try:
            wait_ready([worker])
            text, fmt = path.read_text(), path.suffix.lstrip(".")
            print(f"Importing into an empty inventory ({database.label}) with one worker ...", flush=True)
            started = time.monotonic()
            upload = start_inventory_import(text=text, fmt=fmt, name=path.name)  # returns once the job is queued
            queued = time.monotonic() - started
            job = Job.objects.get(public_id=upload.job_id)
            while Job.objects.get(pk=job.pk).is_active:
                if worker[0].poll() is not None or time.monotonic() - started > 3600:
                    sys.exit(f"the import did not end; see {worker[1]}")
                time.sleep(0.2)
            wall = time.monotonic() - started
            rss = peak_rss_mib(worker[0])
        finally:
            stop([worker])
        job.refresh_from_db()
        events = JobEvent.objects.filter(job=job).order_by("seq")
        progress = [event.created for event in events if (event.data or {}).get("progress")]
        gaps = [(b - a).total_seconds() for a, b in zip(progress, progress[1:], strict=False)]
        result = (events.last().data or {}).get("result", {})
        totals = result.get("totals", {})
        written = totals.get("created", 0) + totals.get("updated", 0)
        counts = inventory_counts()
        print(machine_line())
        print(f"job {job.status}: {job.summary}")
        print(f"the upload's request returned in {queued * 1000:.0f} ms (the file stored, the job queued)")
        print(
            f"the job's wall time, creation to end: {wall:.1f} s; {written:,} rows written, "
            f"{written / wall:,.0f} a second"
        )
        print(
            f"progress events the page follows: {len(progress)}, "
            f"the longest gap between two {max(gaps, default=0):.1f} s"
        )
        print(f"the worker's peak RSS: {rss:.0f} MiB")
        same = counts == expected
        print(f"the imported inventory counts what the exported one did: {'yes' if same else 'NO'}")
        if not same:
            print(f"  exported {expected}\n  imported {counts}")


def main() -> None:
    args = parse_args()
    shared_services_environment("import_fleet")
    if args.target:
        import json

        import_as_a_job(Path(args.target[0]), json.loads(args.target[1]))
        return
    server = os.environ["DATABASE_URL"]  # the source's BenchDatabase points it at its own database
    out = ROOT / "var" / "bench" / f"fleet-{args.nodes}.{args.fmt}"
    out.parent.mkdir(parents=True, exist_ok=True)
    counts = export_fleet(args.nodes, args.fmt, args.keep, out)
    import json

    child = [sys.executable, __file__, "--target", str(out), json.dumps(counts)]
    subprocess.run(child, env={**os.environ, "DATABASE_URL": server}, check=True)
    out.unlink()


if __name__ == "__main__":
    main()
