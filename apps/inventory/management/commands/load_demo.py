from django.core.management.base import BaseCommand, CommandError

from apps.core.audit import audit_context
from apps.core.choices import ChangeSource
from apps.inventory.demo import DEMO, ClusterShape, load_cluster

MAX_NODES = 4096
MAX_RACK_SCALE = 64
# The demo `make run` shows: the H200 racks and one GB200 NVL72 beside them. DEMO itself keeps only the H200 racks,
# which the test suite counts on.
DEFAULT_RACK_SCALE = 1


class Command(BaseCommand):
    help = (
        "Load the demo cluster (32 x 8 H200, dual-plane 400G RoCE, and a GB200 NVL72 rack beside them), or grow it "
        "to --nodes compute nodes and --rack-scale NVL72 racks. "
        "Safe to run again: only missing rows are added, and cables a bigger fabric moves are replaced."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--nodes",
            type=int,
            default=DEMO.compute_nodes,
            help=f"Compute nodes (8 per rack; default {DEMO.compute_nodes}, at most {MAX_NODES}).",
        )
        parser.add_argument(
            "--rack-scale",
            type=int,
            default=DEFAULT_RACK_SCALE,
            help=f"Whole GB200 NVL72 racks beside them (default {DEFAULT_RACK_SCALE}, at most {MAX_RACK_SCALE}).",
        )

    def handle(self, *args, **options):
        nodes = options["nodes"]
        if not 1 <= nodes <= MAX_NODES:
            raise CommandError(f"--nodes {nodes}: give a number of compute nodes from 1 to {MAX_NODES}.")
        rack_scale = options["rack_scale"]
        if not 0 <= rack_scale <= MAX_RACK_SCALE:
            raise CommandError(f"--rack-scale {rack_scale}: give a number of NVL72 racks from 0 to {MAX_RACK_SCALE}.")
        try:
            shape = ClusterShape(compute_nodes=nodes, rack_scale_racks=rack_scale)
        except ValueError as error:  # a fabric the switches cannot build: say which limit, not a database error
            raise CommandError(f"--nodes {nodes}: {error}") from error
        with audit_context(source=ChangeSource.COMMAND):
            created = load_cluster(shape)
        added = {kind: count for kind, count in created.items() if count}
        if added:
            self.stdout.write("Demo cluster loaded: " + ", ".join(f"{count} {kind}" for kind, count in added.items()))
        else:
            self.stdout.write("Demo cluster already complete: nothing to add.")
