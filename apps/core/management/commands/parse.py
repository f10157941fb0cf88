"""manage.py parse TOOL FILE: a thin wrapper around apps.parsers.cli.main (the parsers stay free of Django)."""

import sys

from django.core.management.base import BaseCommand

from apps.parsers import cli


class Command(BaseCommand):
    help = "Parse a tool output file (or '-' for stdin) and print the typed result as JSON. TOOL may be 'auto'."
    stealth_options = ("stdin",)

    def add_arguments(self, parser):
        parser.add_argument("tool", help="a parser name (see apps.parsers.registry) or 'auto'")
        parser.add_argument("file", help="path to the tool's output, or '-' for standard input")

    def handle(self, *args, **options):
        code = cli.main([options["tool"], options["file"]], options.get("stdin") or sys.stdin, self.stdout, self.stderr)
        if code:
            sys.exit(code)
