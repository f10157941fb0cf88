"""manage.py triage FILE… [--json]: the problems in logs, offline, each citing the lines it comes from.

Exit codes: 0 every file was read and nothing was recognised; 1 at least one finding; 2 a file could not be read
(missing, unreadable, binary or empty) — nothing is printed on stdout then. '-' reads standard input.
"""

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand

from apps.core.text import noun
from apps.diagnosis import services

EXIT_NOTHING, EXIT_FINDINGS, EXIT_UNREADABLE = 0, 1, 2


class Command(BaseCommand):
    help = (
        "Triage log files (or '-' for standard input): print the problems found, with the lines they come from. "
        "Exit 0: nothing recognised; 1: findings; 2: a file could not be read."
    )
    stealth_options = ("stdin",)

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+", metavar="FILE", help="a log file, or '-' for standard input")
        parser.add_argument("--json", action="store_true", help="print one JSON object with a 'findings' list")

    def handle(self, *args, **options):
        stdin = options.get("stdin") or sys.stdin
        texts = []
        for name in options["files"]:
            try:
                texts.append(self._read(name, stdin))
            except OSError as error:
                self.stderr.write(f"error: {name}: {error.strerror or error}")
                sys.exit(EXIT_UNREADABLE)
            except services.TriageInputError as error:
                self.stderr.write(f"error: {error.message}")
                sys.exit(EXIT_UNREADABLE)
        results = [services.triage_text(text=text, source=name) for name, text in texts]
        findings = [finding for result in results for finding in result.findings]
        if options["json"]:
            self.stdout.write(json.dumps(_as_json(results, findings), indent=2))
        else:
            self._print(results)
        if findings:
            sys.exit(EXIT_FINDINGS)

    def _read(self, name: str, stdin) -> tuple[str, str]:
        source = "standard input" if name == "-" else name
        if name == "-":
            binary = getattr(stdin, "buffer", None)
            data = binary.read() if binary is not None else stdin.read().encode("utf-8", errors="replace")
        else:
            data = Path(name).read_bytes()
        return source, services.decode_log(data=data, source=source)

    def _print(self, results) -> None:
        for result in results:
            self.stdout.write(result.message)
            for finding in result.findings:
                where = ", ".join(
                    f"{key} {finding[key]}" for key in ("rank", "node", "gpu", "nic", "xid") if finding[key] is not None
                )
                lines = ", ".join(map(str, finding["lines"]))
                self.stdout.write(f"\n{finding['problem']}: {finding['detail']}")
                self.stdout.write(f"  where: {where or 'not stated in the log'}")
                self.stdout.write(f"  {finding['source']} {noun(len(finding['lines']), 'line')} {lines}:")
                for number, text in zip(finding["lines"], finding["excerpt"], strict=True):
                    self.stdout.write(f"    {number:>6}: {text}")
                self.stdout.write(f"  next: {finding['runbook']}: {finding['next_step']}")


def _as_json(results, findings) -> dict:
    return {
        "findings": findings,
        "files": [{"source": r.source, "lines": r.lines, "findings": len(r.findings)} for r in results],
        "recognised": bool(findings),
        "message": " ".join(result.message for result in results),
    }
