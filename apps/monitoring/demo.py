"""The demo's business SLOs: the brief's four criteria on the demo workloads (apps.workloads.demo), so that `make run`
and `make up` open on an SLOs page with budgets to read. Each at its criterion's default target and a 99 % objective;
idempotent: an SLO of the same name is left as it is, and one whose workload is missing is not added.

A demo loaded a moment ago has no past to judge: the simulator's model takes a node's boot from its row's creation
and a workload's start from its own. So when the SLOs are first added, the demo is given a month of history (every
SLO window full): its nodes booted and its workloads started `HISTORY` ago, and the model (not invented figures)
fills that month."""

import datetime as dt

from django.db import transaction
from django.utils import timezone

from apps.inventory.models import (
    Cable,
    CoolantLoop,
    Gpu,
    LeakSensor,
    Nic,
    Node,
    NvlinkDomain,
    NvlinkSwitchTray,
    PowerShelf,
    Switch,
    Volume,
)
from apps.monitoring import slo
from apps.monitoring.models import Slo
from apps.workloads.models import InferenceService, TrainingJob

SERVICE = "chat-llama-70b"
TRAINING_JOB = "llama-pretrain"
# (name, objective, scope); the service's three, and the training job's utilisation (the cluster's, with its idle
# and unallocated nodes, sits far below 85 % by design: the GPU-hours panel shows where it goes).
DEMO_SLOS = (
    (f"{SERVICE}-throughput", slo.Objective.THROUGHPUT, slo.ScopeKind.SERVICE),
    (f"{SERVICE}-p99", slo.Objective.LATENCY_P99, slo.ScopeKind.SERVICE),
    (f"{SERVICE}-energy", slo.Objective.ENERGY_PER_MTOK, slo.ScopeKind.SERVICE),
    (f"{TRAINING_JOB}-utilisation", slo.Objective.GPU_UTILISATION, slo.ScopeKind.TRAINING_JOB),
)


HISTORY = dt.timedelta(days=30)


@transaction.atomic
def load_slos(*, history: dt.timedelta = HISTORY) -> int:
    """Add the demo SLOs whose workload exists; returns how many were added. The first time (none of them there
    yet), the demo is given `history` first."""
    if not Slo.objects.filter(name__in=[name for name, _, _ in DEMO_SLOS]).exists():
        give_history(history)
    scopes = {
        slo.ScopeKind.SERVICE: {"service": InferenceService.objects.filter(name=SERVICE).first()},
        slo.ScopeKind.TRAINING_JOB: {"training_job": TrainingJob.objects.filter(name=TRAINING_JOB).first()},
    }
    added = 0
    for name, objective, scope in DEMO_SLOS:
        workload = scopes[scope]
        if None in workload.values() or Slo.objects.filter(name=name).exists():
            continue
        row = Slo(name=name, objective=objective, scope=scope, target=slo.CRITERIA[objective].default_target)
        for field, value in workload.items():
            setattr(row, field, value)
        row.full_clean()
        row.save()
        added += 1
    return added


# The inventory that was racked with the nodes: the reliability page counts each part's operating hours from its row's
# creation, so a demo whose nodes ran a month and whose GPUs were made a minute ago read "GPU MTBF 36 h".
RACKED_WITH_THE_NODES = (
    Node,
    Gpu,
    Nic,
    Cable,
    Switch,
    Volume,
    NvlinkDomain,
    NvlinkSwitchTray,
    PowerShelf,
    CoolantLoop,
    LeakSensor,
)


def give_history(history: dt.timedelta) -> None:
    """The demo as if racked and running for `history`: its inventory racked, nodes booted, services created and
    training jobs started that long ago (never later than they were)."""
    since = timezone.now() - history
    for model in RACKED_WITH_THE_NODES:
        model.objects.filter(created__gt=since).update(created=since)
    InferenceService.objects.filter(created__gt=since).update(created=since)
    TrainingJob.objects.filter(started_at__gt=since).update(started_at=since)
    TrainingJob.objects.filter(started_at__isnull=True, created__gt=since).update(created=since)
