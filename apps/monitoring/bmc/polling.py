"""The per-site schedule of BMC reads: which sites are due, and starting their `bmc-poll` jobs (the kind:
apps/monitoring/kinds/bmc_poll.py)."""

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Max, Q, QuerySet
from django.utils import timezone

from apps.inventory.models import Node, NvlinkSwitchTray, Site
from apps.jobs.choices import JOB_ACTIVE
from apps.jobs.kinds import get_kind
from apps.jobs.models import Job
from apps.jobs.services import TargetSpec, create_job
from apps.monitoring.models import BmcSchedule
from apps.nodeexec.bmc import SEL_KIND
from apps.nodeexec.transports import default_transport

KIND = "bmc-poll"


def site_interval(site: Site) -> int | None:
    """Seconds between two reads of a site's BMCs; None: the site's schedule is off."""
    schedule = BmcSchedule.objects.filter(site=site).first()
    if schedule is None:
        return settings.RACKPILOT_BMC_POLL_SECONDS
    return schedule.interval_seconds if schedule.enabled else None


def switch_trays_of(*, site: str, nodes) -> QuerySet:
    """The NVLink switch trays a `bmc-poll` reads besides its nodes (or instead of them: BmcPoll.devices): a site's
    scheduled poll, the site's; a poll asked for by hand, those of the NVLink domains its nodes (a queryset) are
    compute trays of. Those without BMC settings are left out by the logins."""
    if site:
        return NvlinkSwitchTray.objects.filter(domain__rack__site__slug=site)
    domains = nodes.filter(nvlink_domain__isnull=False).values("nvlink_domain_id")
    return NvlinkSwitchTray.objects.filter(domain_id__in=domains)


def switch_trays_polled(job: Job) -> QuerySet:
    """The switch trays a `bmc-poll` job's first shard reads beside its nodes (switch_trays_of)."""
    site = (job.parameters or {}).get("site", "")
    return switch_trays_of(site=site, nodes=Node.objects.filter(job_steps__job=job))


def schedule_polls(*, now: datetime | None = None) -> list[Job]:
    """Start a `bmc-poll` job for every site that is due: its interval has passed since its last poll started and no
    poll of it is still queued or running (a slow BMC never piles polls up). Called by beat every
    RACKPILOT_BMC_SCHEDULER_SECONDS."""
    now = now or timezone.now()
    started = []
    with_bmcs = Q(racks__nodes__bmc__isnull=False) | Q(racks__nvlink_domain__switch_trays__bmc__isnull=False)
    sites = Site.objects.filter(with_bmcs).distinct()
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
        transport = None
        if not spec.nodes:  # its switch trays alone, as rows of their own: over the transport the site's nodes record
            kind = get_kind(KIND)
            nodes = Node.objects.filter(rack__site=site).only("transport")
            transport = kind.default_transport or default_transport(offered=kind.transports, nodes=nodes)
        started.append(create_job(kind=KIND, targets=spec, parameters={"site": site.slug}, transport=transport))
    return started


def schedule_sel_reads() -> Job | None:
    """Start one `bmc-sel` job over every node with BMC settings, unless one is still queued or running (a slow BMC
    never piles reads up). Called by beat every RACKPILOT_BMC_SEL_SECONDS."""
    if Job.objects.filter(kind=SEL_KIND, status__in=JOB_ACTIVE).exists():
        return None
    nodes = Node.objects.filter(bmc__isnull=False).exclude(bmc_address="").order_by("hostname")
    if not nodes.exists():
        return None
    spec = TargetSpec(nodes=tuple(str(public_id) for public_id in nodes.values_list("public_id", flat=True)))
    return create_job(kind=SEL_KIND, targets=spec)
