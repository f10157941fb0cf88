"""BMC settings of a node, the per-site schedule of BMC reads, pruning old readings."""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from apps.inventory.models import Node, Site
from apps.jobs.choices import JOB_ACTIVE
from apps.jobs.models import Job
from apps.jobs.services import TargetSpec, create_job
from apps.monitoring.models import Bmc, BmcReading, BmcSchedule

KIND = "bmc-poll"  # the kind: apps/monitoring/kinds.py


@transaction.atomic
def save_bmc(
    *,
    node: Node,
    address: str,
    protocol: str,
    port: int | None,
    user: str,
    verify_tls: bool,
    password: str = "",
    clear_password: bool = False,
) -> Bmc:
    """Create or change a node's BMC settings. An empty `password` keeps the stored one (it is write-only);
    `clear_password` forgets it. The address is the node's own bmc_address. Validated by the form or serializer."""
    bmc = Bmc.objects.filter(node=node).first() or Bmc(node=node)
    bmc.protocol, bmc.port, bmc.user, bmc.verify_tls = protocol, port, user, verify_tls
    if password:
        bmc.set_password(password)
    elif clear_password:
        bmc.set_password("")
    bmc.full_clean(exclude=["node"])
    bmc.save()
    if node.bmc_address != address:
        node.bmc_address = address
        node.save(update_fields=["bmc_address", "updated"])
    return bmc


def site_interval(site: Site) -> int | None:
    """Seconds between two reads of a site's BMCs; None: the site's schedule is off."""
    schedule = BmcSchedule.objects.filter(site=site).first()
    if schedule is None:
        return settings.RACKPILOT_BMC_POLL_SECONDS
    return schedule.interval_seconds if schedule.enabled else None


def schedule_polls(*, now: datetime | None = None) -> list[Job]:
    """Start a `bmc-poll` job for every site that is due: its interval has passed since its last poll started and no
    poll of it is still queued or running (a slow BMC never piles polls up). Called by beat every
    RACKPILOT_BMC_SCHEDULER_SECONDS."""
    now = now or timezone.now()
    started = []
    sites = Site.objects.filter(racks__nodes__bmc__isnull=False).distinct()
    for site in sites:
        interval = site_interval(site)
        if interval is None:
            continue
        polls = Job.objects.filter(kind=KIND, parameters__site=site.slug)
        if polls.filter(status__in=JOB_ACTIVE).exists():
            continue
        last = polls.aggregate(last=Max("created"))["last"]
        if last is not None and now - last < timedelta(seconds=interval):
            continue
        nodes = Node.objects.filter(rack__site=site, bmc__isnull=False).order_by("hostname")
        spec = TargetSpec(nodes=tuple(str(public_id) for public_id in nodes.values_list("public_id", flat=True)))
        started.append(
            create_job(
                kind=KIND,
                targets=spec,
                parameters={"site": site.slug},
            )
        )
    return started


def prune_readings(*, now: datetime | None = None) -> int:
    """Delete readings older than RACKPILOT_BMC_RETENTION_DAYS; returns how many went."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.RACKPILOT_BMC_RETENTION_DAYS)
    deleted, _ = BmcReading.objects.filter(time__lt=cutoff).delete()
    return deleted
