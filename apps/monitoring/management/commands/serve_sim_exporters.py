from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from apps.monitoring.exporters import exporter_server
from apps.monitoring.rule_files import write_rules
from apps.monitoring.targets import write_targets


class Command(BaseCommand):
    help = (
        "Serve the simulated cluster's dcgm-exporter (/nodes/<host>/metrics) and vLLM (/services/<name>/metrics) "
        "pages for Prometheus, and write Prometheus's file_sd targets pointing at them and its rules."
    )

    def add_arguments(self, parser):
        parser.add_argument("--listen", default=settings.RACKPILOT_SIM_EXPORTERS, help="host:port to listen on.")
        parser.add_argument(
            "--advertise", default="", help="host:port Prometheus reaches them at (default: what --listen binds)."
        )

    def handle(self, *args, listen, advertise, **options):
        host, _, port = listen.rpartition(":")
        if not host or not port.isdigit():
            raise CommandError(f"--listen takes host:port, such as 127.0.0.1:9400, not {listen!r}")
        server = exporter_server(host=host, port=int(port))
        written = write_targets(exporters=advertise or f"{host}:{server.port}")
        written += [path for path in [write_rules()] if path is not None]
        for path in written:
            self.stdout.write(f"Wrote {path}")
        self.stdout.write(
            f"Simulated exporters at http://{host}:{server.port}/nodes/<host>/metrics — Ctrl-C stops them."
        )
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.stop()
