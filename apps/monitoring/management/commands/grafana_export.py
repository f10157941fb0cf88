"""manage.py grafana_export DIR: write Grafana's provisioning files and Rackpilot's dashboards under DIR."""

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from apps.monitoring import grafana


class Command(BaseCommand):
    help = "Write Grafana provisioning (the Prometheus data source, the dashboard provider) and dashboards into DIR."

    def add_arguments(self, parser):
        parser.add_argument("directory")
        parser.add_argument(
            "--prometheus-url",
            default=None,
            help="the data source's URL as Grafana reaches it (default: RACKPILOT_PROMETHEUS_URL or http://prometheus:9090)",
        )

        parser.add_argument(
            "--dashboards-dir",
            default=grafana.DASHBOARD_DIR,
            help=f"where Grafana will find DIR/dashboards (default {grafana.DASHBOARD_DIR})",
        )

    def handle(self, *args, **options):
        url = options["prometheus_url"] or getattr(settings, "RACKPILOT_PROMETHEUS_URL", "") or "http://prometheus:9090"
        if not url.startswith(("http://", "https://")):
            raise CommandError(f"--prometheus-url {url!r}: give an http:// or https:// URL")
        root = Path(options["directory"])
        for path, text in grafana.bundle(url, options["dashboards_dir"]).items():
            target = root / path
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
            except OSError as error:
                raise CommandError(f"{target}: cannot write it ({error.strerror})") from None
            self.stdout.write(str(target))
