from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.inventory.transfer import IMPORT_FORMATS, export_inventory, export_nodes_csv, guess_format


class Command(BaseCommand):
    help = (
        "Write the whole inventory as one JSON or YAML document (import_inventory reads it back), or the nodes as CSV."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--format",
            choices=IMPORT_FORMATS,
            help="json, yaml or csv (nodes only). Default: from -o's extension, or json.",
        )
        parser.add_argument("-o", "--output", metavar="FILE", help="Write to FILE instead of standard output.")

    def handle(self, *args, **options):
        output = options["output"]
        to_file = output not in (None, "-")
        fmt = options["format"] or (guess_format(output) if to_file else None) or "json"
        text = export_nodes_csv() if fmt == "csv" else export_inventory(fmt=fmt)
        if not to_file:
            self.stdout.write(text, ending="")
            return
        try:
            Path(output).write_text(text, encoding="utf-8")
        except OSError as error:
            raise CommandError(f"Cannot write {output}: {error.strerror}.") from None
        self.stdout.write(f"Wrote the {'nodes' if fmt == 'csv' else 'inventory'} to {output} ({fmt}).")
