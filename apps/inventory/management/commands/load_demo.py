from django.core.management.base import BaseCommand, CommandError

from apps.core.audit import audit_context
from apps.core.choices import ChangeSource
from apps.inventory.demo import DEMO, ClusterShape, load_cluster

MAX_NODES = 4096


class Command(BaseCommand):
    help = (
        "Load the demo cluster (32 x 8 H200, dual-plane 400G RoCE), or grow it to --nodes compute nodes. "
        "Safe to run again: only missing rows are added, and cables a bigger fabric moves are replaced."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--nodes",
            type=int,
            default=DEMO.compute_nodes,
            help=f"Compute nodes (8 per rack; default {DEMO.compute_nodes}, at most {MAX_NODES}).",
        )

    def handle(self, *args, **options):
        nodes = options["nodes"]
        if not 1 <= nodes <= MAX_NODES:
            raise CommandError(f"--nodes {nodes}: give a number of compute nodes from 1 to {MAX_NODES}.")
        try:
            shape = ClusterShape(compute_nodes=nodes)
        except ValueError as error:  # a fabric the switches cannot build: say which limit, not a database error
            raise CommandError(f"--nodes {nodes}: {error}") from error
        with audit_context(source=ChangeSource.COMMAND):
            created = load_cluster(shape)
        added = {kind: count for kind, count in created.items() if count}
        if added:
            self.stdout.write("Demo cluster loaded: " + ", ".join(f"{count} {kind}" for kind, count in added.items()))
        else:
            self.stdout.write("Demo cluster already complete: nothing to add.")
