from django.core.management.base import BaseCommand

from apps.core.audit import audit_context
from apps.core.choices import ChangeSource
from apps.inventory.demo import DEMO, load_cluster


class Command(BaseCommand):
    help = "Load the demo cluster (32 x 8 H200, dual-plane 400G RoCE). Safe to run again: only missing rows are added."

    def handle(self, *args, **options):
        with audit_context(source=ChangeSource.COMMAND):
            created = load_cluster(DEMO)
        added = {kind: count for kind, count in created.items() if count}
        if added:
            self.stdout.write("Demo cluster loaded: " + ", ".join(f"{count} {kind}" for kind, count in added.items()))
        else:
            self.stdout.write("Demo cluster already complete: nothing to add.")
