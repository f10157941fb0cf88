"""manage.py discover: run a discovery job in this process and print its cells, could-not-run reasons and differences.

`--local` probes the host this command runs on (the local transport), `--node NAME` an inventory node over any
transport (`--transport sim` on the demo cluster). The shards run here, as a worker would run them (they are never
queued), so the job needs no Celery worker; the command exits 0 when the job succeeded and 1 otherwise.
"""

import socket

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from rest_framework import serializers

from apps.core.audit import audit_context
from apps.core.choices import ChangeSource
from apps.core.forms import flat_messages
from apps.discovery import services
from apps.discovery.models import Difference, NodeFacts
from apps.inventory.models import Node
from apps.inventory.models.nodes import hostname_validator
from apps.jobs import executor
from apps.jobs import services as job_services
from apps.jobs.choices import JobStatus
from apps.jobs.models import Job, JobStep
from apps.nodeexec.transports import TRANSPORT_NAMES


class Command(BaseCommand):
    help = (
        "Discover one node and print every cell of the job (step, status, summary), what could not run and the "
        "differences from the inventory. --local: this host, over the local transport; when the inventory has no "
        "node of that host name, a bare Node row is created (host name only: the inventory needs no rack, site or "
        "GPU SKU for a node; discovery fills in what it reads and records the rest as differences). --node NAME: an "
        "inventory node over --transport (sim on the demo cluster: run `manage.py load_demo` first). Exit status 0 "
        "when the job succeeded, 1 otherwise (a host without GPUs: the GPU cells could not run)."
    )

    def add_arguments(self, parser):
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--local", action="store_true", help="Discover this host over the local transport.")
        target.add_argument("--node", metavar="HOSTNAME", help="Discover this inventory node.")
        parser.add_argument(
            "--hostname", help="With --local: the node's host name in the inventory (default: this host's name)."
        )
        parser.add_argument(
            "--transport",
            choices=TRANSPORT_NAMES,
            help="With --node: how commands reach it (default: RACKPILOT_JOB_DEFAULT_TRANSPORT).",
        )
        parser.add_argument(
            "--interfaces",
            help="Comma-separated data NICs to read (default: the node's data NICs in the inventory, if any).",
        )

    def handle(self, *args, **options):
        if options["local"]:
            if options["transport"] not in (None, "local"):
                raise CommandError("--local always runs over the local transport; use --node for another one")
            node, transport = self._this_host(options["hostname"] or socket.gethostname()), "local"
        else:
            if options["hostname"]:
                raise CommandError("--hostname goes with --local (--node names an inventory node)")
            node, transport = self._inventory_node(options["node"]), options["transport"]
        job = self._start(node, transport, options["interfaces"])
        self.stdout.write(f"discover {node.hostname} over {job.transport}: job {job.public_id}")
        job = self._run_here(job)
        self._print_cells(job)
        self._print_findings(job)
        self.stdout.write(f"job {job.status}: {job.summary}")
        if job.status != JobStatus.SUCCEEDED:
            raise CommandError(f"the discovery job ended {job.status}", returncode=1)

    # --- the node and the job -------------------------------------------------------------------------------------

    def _this_host(self, hostname: str) -> Node:
        try:
            hostname_validator(hostname)
        except ValidationError:
            raise CommandError(f"{hostname!r} is not a valid inventory host name; pass --hostname NAME") from None
        with audit_context(source=ChangeSource.COMMAND):
            node, created = Node.objects.get_or_create(hostname=hostname)
        if created:
            self.stdout.write(f"added {hostname} to the inventory (no rack, site or GPU SKU)")
        return node

    def _inventory_node(self, hostname: str) -> Node:
        node = Node.objects.filter(hostname=hostname).first()
        if node is None:
            raise CommandError(f"no node {hostname!r} in the inventory (`manage.py load_demo` loads the demo cluster)")
        return node

    def _start(self, node: Node, transport: str | None, interfaces: str | None) -> Job:
        names = None if interfaces is None else [name.strip() for name in interfaces.split(",") if name.strip()]
        try:
            return services.start_discovery(
                targets=job_services.TargetSpec(nodes=(node.hostname,)),
                transport=transport,
                interfaces=names,
                queue=False,  # run here: --local means this host, never a Celery worker's
            )
        except serializers.ValidationError as error:
            raise CommandError("the job was refused: " + "; ".join(map(str, flat_messages(error.detail)))) from None

    def _run_here(self, job: Job) -> Job:
        """Run every shard in this process, as a worker would."""
        for shard in job.shards.order_by("index"):
            executor.run_shard(job_public_id=str(job.public_id), index=shard.index)
        job.refresh_from_db()
        return job

    # --- printing -------------------------------------------------------------------------------------------------

    def _print_cells(self, job: Job) -> None:
        cells = JobStep.objects.filter(job=job).order_by("hostname", "position")
        width = max((len(cell.step) for cell in cells), default=4)
        self.stdout.write("cells:")
        for cell in cells:
            self.stdout.write(f"  {cell.hostname}  {cell.step:<{width}}  {cell.status:<9}  {cell.summary}")

    def _print_findings(self, job: Job) -> None:
        for facts in NodeFacts.objects.filter(job=job).select_related("node"):
            for step, reason in sorted(facts.could_not_run.items()):
                self.stdout.write(f"could not run on {facts.node.hostname}: {step}: {reason}")
            for note in facts.notes:
                self.stdout.write(f"note on {facts.node.hostname}: {note}")
        differences = list(Difference.objects.filter(job=job).select_related("node"))
        self.stdout.write(f"differences from the inventory: {len(differences)}")
        for difference in differences:
            self.stdout.write(f"  [{difference.get_state_display().lower()}] {difference}")
