"""What the `bmc-poll` kind reads before its fan-out and writes after it (kept apart from the kind, so that the
app's services may import the kind and the kind this module)."""

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from apps.jobs.models import JobShard, JobStep
from apps.monitoring.bmc import BmcLogin, PollOutcome
from apps.monitoring.choices import PollResult
from apps.monitoring.models import Bmc, BmcReading


def shard_logins(shard: JobShard) -> dict[str, tuple[int, BmcLogin]]:
    """hostname -> (node id, login) for the shard's nodes that have BMC settings; passwords decrypted here, kept in
    memory only for the poll."""
    node_ids = set(JobStep.objects.filter(shard=shard).values_list("node_id", flat=True))
    logins = {}
    for bmc in Bmc.objects.filter(node_id__in=node_ids).select_related("node"):
        login = BmcLogin(
            hostname=bmc.node.hostname,
            protocol=bmc.protocol,
            address=bmc.node.bmc_address,
            port=bmc.effective_port,
            user=bmc.user,
            password=bmc.password(),
            verify_tls=bmc.verify_tls,
        )
        logins[bmc.node.hostname] = (bmc.node_id, login)
    return logins


COUNTER_OF = {PollResult.OK: "polls_ok", PollResult.PARTIAL: "polls_partial"}


def record_polls(outcomes: dict[int, PollOutcome], *, at: datetime) -> int:
    """Store the readings of a shard's polls and each BMC's last result; returns how many readings were written.

    A refused or failed poll writes no readings: only its BMC's last result, message and failure count change.
    Updates go through the queryset (no per-poll audit entries: a poll is not an operator's change).
    """
    rows = [
        BmcReading(node_id=node_id, time=at, kind=r.kind, sensor=r.sensor[:64], unit=r.unit, value=r.value)
        for node_id, outcome in outcomes.items()
        if outcome.result in (PollResult.OK, PollResult.PARTIAL)
        for r in outcome.readings
    ]
    with transaction.atomic():
        BmcReading.objects.bulk_create(rows, batch_size=2000)
        for node_id, outcome in outcomes.items():
            counter = COUNTER_OF.get(outcome.result, "polls_failed")
            Bmc.objects.filter(node_id=node_id).update(
                last_polled=at,
                last_result=outcome.result,
                last_message=outcome.message[:300],
                **{counter: F(counter) + 1},
            )
    return len(rows)


def prune_readings(*, days: int, now: datetime | None = None) -> int:
    """Delete readings older than `days`; returns how many went."""
    cutoff = (now or timezone.now()) - timedelta(days=days)
    deleted, _ = BmcReading.objects.filter(time__lt=cutoff).delete()
    return deleted
