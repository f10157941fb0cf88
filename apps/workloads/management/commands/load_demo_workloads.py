from django.core.management.base import BaseCommand

from apps.core.audit import audit_context
from apps.core.choices import ChangeSource
from apps.workloads.demo import load_workloads


class Command(BaseCommand):
    help = "Add the demo cluster's workloads (an inference service, a training job). Run after load_demo; safe again."

    def handle(self, *args, **options):
        with audit_context(source=ChangeSource.COMMAND):
            created = load_workloads()
        added = {kind: count for kind, count in created.items() if count}
        if added:
            self.stdout.write("Demo workloads loaded: " + ", ".join(f"{count} {kind}" for kind, count in added.items()))
        else:
            self.stdout.write("Demo workloads already present (or their nodes missing): nothing to add.")
