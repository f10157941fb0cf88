"""manage.py capture_node OUTDIR: this host's tool outputs, anonymised and checked, as a new parser fixture folder."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.discovery import capture


class Command(BaseCommand):
    help = (
        "Run the read-only commands whose output Rackpilot parses (nvidia-smi, lscpu, numactl, lsblk, ip, ethtool, "
        "and ibstat, mlnx_qos, dcgmi where installed) on this host; anonymise the outputs (GPU UUIDs and serials, "
        "PDIs/GUIDs, MAC addresses, host name) and write each one that parses into OUTDIR, with a README.md. "
        "Copy OUTDIR, without its rejected/ folder, to tests/fixtures/real/<name>/ to make the files fixtures."
    )

    def add_arguments(self, parser):
        parser.add_argument("outdir", type=Path, help="A new or empty folder (nothing is overwritten).")
        parser.add_argument(
            "--interfaces",
            default=None,
            help="Comma-separated interfaces for ethtool / mlnx_qos (default: every one ip -j link lists but lo).",
        )

    def handle(self, *args, **options):
        interfaces = None
        if options["interfaces"] is not None:
            interfaces = [name.strip() for name in options["interfaces"].split(",") if name.strip()]
        try:
            report = capture.capture(options["outdir"], interfaces=interfaces)
        except capture.CaptureError as error:
            raise CommandError(str(error)) from None
        for outcome in report.outcomes:
            self.stdout.write(self._line(outcome))
        written = len(report.with_status(capture.WRITTEN))
        skipped = len(report.with_status(capture.SKIPPED))
        rejected = len(report.with_status(capture.REJECTED_STATUS))
        self.stdout.write(
            f"{written} written, {skipped} skipped, {rejected} rejected; {report.outdir / 'README.md'} lists them"
        )
        if not report.captured_anything:
            raise CommandError("nothing could be captured on this host (every command was skipped)")

    @staticmethod
    def _line(outcome: capture.Outcome) -> str:
        name = f"{outcome.command.filename:<46}"
        if outcome.status == capture.WRITTEN:
            return f"written   {name} {outcome.command.short_display} ({outcome.seconds:.1f} s)"
        if outcome.status == capture.SKIPPED:
            optional = " (read where installed)" if outcome.command.optional else ""
            return f"skipped   {name} {outcome.reason}{optional}"
        return f"rejected  {name} {outcome.reason} (kept in {capture.REJECTED}/)"
