import sys
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from apps.inventory.transfer import IMPORT_FORMATS, ImportRejected, guess_format, import_inventory


class Command(BaseCommand):
    help = (
        "Create or update inventory objects from an export_inventory document (JSON or YAML) or a nodes CSV. "
        "All or nothing: on any problem, every problem is listed as FILE:LINE: section field: message and nothing "
        "is imported."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="The file to read, or - for standard input.")
        parser.add_argument("--format", choices=IMPORT_FORMATS, help="Default: from the file's extension.")
        parser.add_argument("--dry-run", action="store_true", help="Check the file and count; save nothing.")
        parser.add_argument("--user", metavar="USERNAME", help="Record the changes in the audit log as this user's.")

    def handle(self, *args, **options):
        path = options["file"]
        name = "<stdin>" if path == "-" else path
        fmt = options["format"] or (None if path == "-" else guess_format(path))
        if fmt is None:
            raise CommandError(f"Cannot tell the format of {name}; give --format json, yaml or csv.")
        text = self._read(path)
        user = self._user(options["user"])
        try:
            result = import_inventory(text=text, fmt=fmt, user=user, dry_run=options["dry_run"])
        except ImportRejected as rejected:
            for problem in rejected.problems:
                where = f"{name}:{problem.location}" if problem.location else name
                what = f"{problem.section} {problem.field}" if problem.field else problem.section
                self.stderr.write(f"{where}: {what}: {problem.message}")
            raise CommandError(f"{name}: {rejected}.") from None
        for section, counts in result.sections.items():
            self.stdout.write(
                f"{section}: {counts.created} created, {counts.updated} updated, {counts.unchanged} unchanged"
            )
        totals = result.totals
        verdict = "Dry run, nothing saved" if result.dry_run else "Imported"
        self.stdout.write(
            f"{verdict}: {totals.created} created, {totals.updated} updated, {totals.unchanged} unchanged."
        )

    def _read(self, path: str) -> str:
        try:
            return sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
        except OSError as error:
            raise CommandError(f"Cannot read {path}: {error.strerror}.") from None
        except UnicodeDecodeError as error:
            raise CommandError(f"{path} is not UTF-8 text (byte {error.start}).") from None

    def _user(self, username: str | None):
        if username is None:
            return None
        try:
            return get_user_model().objects.get_by_natural_key(username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"No user {username!r}.") from None
