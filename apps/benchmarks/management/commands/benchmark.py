"""manage.py benchmark run SUITE --nodes NODES [--transport sim] [--json]: a benchmark run in this process.

The rounds run here, as a worker would run them (their jobs are never queued), so no Celery worker is needed.
Exit status 0 when the run succeeded (a sweep that named suspects succeeded: it did its job), 1 otherwise.
"""

import contextlib
import json
import signal
import threading
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from rest_framework import serializers

from apps.benchmarks import services, timelines
from apps.benchmarks.choices import ITERATIONS, MAX_BYTES, MIN_BYTES, NODE_SUITES, Collective, RunStatus, Suite
from apps.benchmarks.models import TimelineAnalysis
from apps.core.audit import audit_context
from apps.core.choices import ChangeSource
from apps.core.forms import flat_messages
from apps.core.threads import thread_connection_returned
from apps.jobs import executor

UNITS = {"K": 2**10, "M": 2**20, "G": 2**30}


def size(text: str) -> int:
    """nccl-tests' sizes: a whole number with an optional K, M or G (powers of 1024)."""
    number, unit = (text[:-1], UNITS[text[-1].upper()]) if text[-1:].upper() in UNITS else (text, 1)
    if not number.isdigit():
        raise CommandError(f"{text!r} is not a size (a number of bytes, or with K, M or G)")
    return int(number) * unit


class Command(BaseCommand):
    help = (
        "Run a benchmark suite and print its results. SUITE: nccl (each node alone when one node is named, else one "
        "mpirun across the set), nccl-sweep (find the slow node or link by halving), nccl-pairwise (every pair of a "
        "small set), hpl-mxp (each node alone, then across the set), nvbandwidth (every copy test case of each node), "
        "burn-in (gpu_burn for --duration seconds with clocks and temperatures sampled). "
        "NODES: comma-separated host names, rack:NAME or tag:NAME. `benchmark timeline FILE... [--json]` analyses "
        "training timelines (Chrome traces)."
    )

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        run = sub.add_parser("run", help="Run a suite now, in this process.")
        run.add_argument("suite", help=f"One of {', '.join(Suite.values)}.")
        run.add_argument("--nodes", required=True, help="Host names, rack:NAME or tag:NAME, comma-separated.")
        run.add_argument(
            "--transport", default=None, help="ssh, sim, or local (per-node suites); default: the install's."
        )
        run.add_argument("--collective", default=Collective.ALL_REDUCE, help=f"One of {', '.join(Collective.values)}.")
        run.add_argument("--min-bytes", type=size, default=MIN_BYTES, help="Smallest message (8 B).")
        run.add_argument("--max-bytes", type=size, default=MAX_BYTES, help="Largest message (16G).")
        run.add_argument("--iterations", type=int, default=ITERATIONS, help="nccl-tests -n per size (20).")
        run.add_argument("--cooldown", type=float, default=services.DEFAULT_COOLDOWN_SECONDS, help="Seconds.")
        run.add_argument("--duration", type=int, default=None, help="burn-in: seconds of soak (60 to 14400).")
        run.add_argument("--load", default="gpu-burn", help="burn-in: gpu-burn (default), dcgmi-r3 or dcgmi-r4.")
        run.add_argument("--hpl-n", type=int, default=None, help="hpl-mxp: the matrix order (default: fits memory).")
        run.add_argument("--json", action="store_true", help="Print the report as JSON.")
        timeline = sub.add_parser(
            "timeline",
            help="Analyse Chrome traces (PyTorch profiler, one file per rank; or a Horovod timeline): compute, "
            "communication, overlap and idle time per step and per rank. The analysis is stored.",
        )
        timeline.add_argument(
            "files", nargs="+", help="Trace files, .json or .json.gz; with --from-nodes NODE:/absolute/path on a node."
        )
        timeline.add_argument(
            "--from-nodes",
            action="store_true",
            help="Read each NODE:/PATH off its node (over --transport) with a timeline-trace job run "
            "in this process; exit 1 when a file could not be read.",
        )
        timeline.add_argument(
            "--transport", default="", help="--from-nodes: ssh (the only transport that reads traces)."
        )
        timeline.add_argument("--name", default="", help="A name for the analysis (default: the first file's).")
        timeline.add_argument("--json", action="store_true", help="Print the report as JSON.")

    def handle(self, *args, **options):
        if options["action"] == "timeline":
            self._timeline(options)
            return
        try:
            run = services.start_run(
                suite=options["suite"],
                targets=services.parse_nodes(options["nodes"]),
                collective=options["collective"],
                min_bytes=options["min_bytes"],
                max_bytes=options["max_bytes"],
                iterations=options["iterations"],
                transport=options["transport"],
                cooldown_seconds=options["cooldown"],
                duration_seconds=options["duration"],
                hpl_n=options["hpl_n"],
                burn_load=options["load"],
                queue=False,
            )
        except serializers.ValidationError as error:
            raise CommandError("; ".join(flat_messages(error.detail))) from None
        run = self._execute(run)
        if run.suite in NODE_SUITES:
            self._node_report(run, as_json=options["json"])
        else:
            self._nccl_report(run, as_json=options["json"])
        if run.status != RunStatus.SUCCEEDED:
            raise CommandError(f"the benchmark run ended {run.status}", returncode=1)

    def _execute(self, run):
        """The run's rounds here. The first Ctrl-C cancels the run as the API's cancel does (the round's job ends its
        commands or its cool-down, no further round starts, what was measured is kept); a second one stops at once."""
        if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
            return services.execute_run(run=run)
        previous = signal.getsignal(signal.SIGINT)

        def cancel() -> None:  # in a thread of its own: the handler may interrupt a query of the main thread
            ended = contextlib.suppress(services.RunFinished)  # it ended meanwhile: nothing to cancel
            with thread_connection_returned(), audit_context(source=ChangeSource.COMMAND), ended:
                services.cancel_run(run=run)

        def on_interrupt(signum, frame) -> None:
            signal.signal(signal.SIGINT, previous)
            self.stderr.write("canceling the run: the current round stops (Ctrl-C again to stop at once)")
            threading.Thread(target=cancel, name="benchmark-cancel").start()

        signal.signal(signal.SIGINT, on_interrupt)
        try:
            return services.execute_run(run=run)
        finally:
            signal.signal(signal.SIGINT, previous)

    def _timeline(self, options) -> None:
        read = self._timeline_from_nodes if options["from_nodes"] else self._timeline_upload
        self._timeline_report(read(options), as_json=options["json"])

    def _timeline_from_nodes(self, options):
        files = []
        for item in options["files"]:
            node, colon, path = item.partition(":")
            if not colon or not node or not path:
                raise CommandError(f"{item}: name each file as NODE:/absolute/path")
            files.append({"node": node, "path": path})
        try:
            job = timelines.take_from_nodes(
                files=files, name=options["name"], transport=options["transport"], queue=False
            )
        except serializers.ValidationError as error:
            raise CommandError("; ".join(flat_messages(error.detail))) from None
        for shard in job.shards.order_by("index"):
            executor.run_shard(job_public_id=str(job.public_id), index=shard.index, worker="benchmark-cli")
        analysis = TimelineAnalysis.objects.filter(job=job).first()
        if analysis is None:
            reasons = [f"{cell.hostname}: {cell.summary}" for cell in job.steps.order_by("hostname") if cell.summary]
            raise CommandError("no analysis stored: " + ("; ".join(reasons) or "the job did not finish"), returncode=1)
        return analysis

    def _timeline_upload(self, options):
        opened = []
        try:
            for path in options["files"]:
                try:
                    opened.append((Path(path).name, open(path, "rb")))  # noqa: SIM115 (closed below)
                except OSError as error:
                    raise CommandError(f"{path}: {error.strerror}") from None
            analysis = timelines.analyse_upload(files=opened, name=options["name"])
        except serializers.ValidationError as error:
            raise CommandError("; ".join(flat_messages(error.detail))) from None
        finally:
            for _, stream in opened:
                stream.close()
        return analysis

    def _timeline_report(self, analysis, *, as_json: bool) -> None:
        report = timelines.report(analysis)
        if as_json:
            self.stdout.write(json.dumps(report, indent=2))
            return
        for row in report["per_rank"]:
            self.stdout.write(
                f"rank {row['rank']:>4} {row['source'][:40]:<40} step {row['step_ms']:>10.3f} ms  compute "
                f"{row['compute_ms']:>10.3f}  communication {row['communication_ms']:>10.3f}  overlap "
                f"{row['overlap_ms']:>10.3f}  idle {row['idle_ms']:>10.3f}"
            )
        share = report["communication_share"]
        exposed = report["exposed_communication_share"]
        case = report["case_study_communication_pct"]
        self.stdout.write(
            f"communication {'-' if share is None else f'{100 * share:.1f}'} % of the step time (exposed "
            f"{'-' if exposed is None else f'{100 * exposed:.1f}'} %); the brief's case study: {case['before']:g} % "
            f"before, {case['after']:g} % after"
        )
        if report["slowest_rank"]:
            slowest = report["slowest_rank"]
            self.stdout.write(
                f"slowest rank {slowest['rank']} ({slowest['source']}): {slowest['compute_ms']} ms compute"
            )
        self.stdout.write(f"analysis {report['analysis']}")

    def _node_report(self, run, *, as_json: bool) -> None:
        report = services.node_suite_report(run)
        if as_json:
            self.stdout.write(json.dumps(report, indent=2))
            return
        for row in report["measurements"]:
            value = "-" if row["value"] is None else f"{row['value']:g}"
            expected = f" (expected {row['expected']:g})" if row["expected"] else ""
            self.stdout.write(
                f"round {row['round']} {'+'.join(row['hosts'])[:40]:<40} {row['case']:<46} {value:>10} "
                f"{row['unit']}{expected} {row['verdict']}"
            )
            for note in row["notes"]:
                self.stdout.write(f"    {note}")
        self.stdout.write(f"run {run.status}: {run.summary}")

    def _nccl_report(self, run, *, as_json: bool) -> None:
        report = services.sweep_report(run)
        if as_json:
            self.stdout.write(json.dumps(report, indent=2))
        else:
            for row in report["results"]:
                self.stdout.write(
                    f"round {row['round']} {row['purpose']:<8} {'+'.join(row['hosts'])[:60]:<60} "
                    f"{row['busbw_gb_per_s'] or '-':>8} GB/s {row['verdict']}"
                )
            for suspect in report["suspects"]:
                self.stdout.write(
                    f"suspect {suspect['node']} {suspect['nic']} cable {suspect['cable']} "
                    f"{suspect['switch']} {suspect['switch_port']}: {suspect['cause']}"
                )
            self.stdout.write(f"run {run.status}: {run.summary}")
