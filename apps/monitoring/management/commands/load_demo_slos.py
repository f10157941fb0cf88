from django.core.management.base import BaseCommand

from apps.core.audit import audit_context
from apps.core.choices import ChangeSource
from apps.monitoring.demo import load_slos


class Command(BaseCommand):
    help = "Add the demo's four business SLOs on the demo workloads. Run after load_demo_workloads; safe again."

    def handle(self, *args, **options):
        with audit_context(source=ChangeSource.COMMAND):
            added = load_slos()
        self.stdout.write(f"Demo SLOs loaded: {added}" if added else "Demo SLOs already present: nothing to add.")
