"""A simulated fault campaign on the twin: seeded synthetic health events on the inventory, for the back-test to replay
(apps/remediation/backtest.py). Nothing here writes; the back-test creates the events inside its rolled-back savepoint.

The mix is modelled on what a GPU fleet sees (docs/health.md, "Back-testing"): GPUs falling off the bus (XID 79),
uncorrectable ECC, double-bit errors (XID 48), application XIDs (13), degraded links, and one leaf switch going down,
which takes every node cabled to it at once (a `link_down` on each of their NICs, the same minute). Some faults are
transient and a validation clears them after a few hours; the rest stay open (a repair) to the campaign's end.
"""

import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q

from apps.health.choices import ClearedBy, Severity
from apps.inventory.choices import NodeRole, SwitchTier
from apps.inventory.models import Cable, Gpu, Switch

# kind, severity, part, share of the mix, chance a validation clears it (transient), summary
MIX = (
    ("xid79", Severity.CRITICAL, "gpu", 0.25, 0.3, "XID 79, GPU has fallen off the bus"),
    ("ecc_uncorrectable", Severity.CRITICAL, "gpu", 0.15, 0.2, "uncorrectable ECC error"),
    ("xid48", Severity.MAJOR, "gpu", 0.15, 0.5, "XID 48, double-bit ECC error"),
    ("xid13", Severity.MINOR, "gpu", 0.2, 0.9, "XID 13, graphics engine exception"),
    ("link_degraded", Severity.MAJOR, "cable", 0.25, 0.6, "link trained below plan"),
)
FAULTS = 24  # besides the leaf switch's


@dataclass(frozen=True)
class Fault:
    """One synthetic event: what, where (a Gpu, Nic or Cable), when, and how it ends."""

    component: object
    kind: str
    severity: str
    summary: str
    first_seen: datetime
    cleared_at: datetime | None
    cleared_by: str


def leaf_nodes() -> tuple[Switch | None, list]:
    """The leaf switch with the most compute nodes' NICs cabled to it, and those NICs (one per node)."""
    best, best_nics = None, []
    for switch in Switch.objects.filter(tier=SwitchTier.LEAF).order_by("name"):
        cables = Cable.objects.filter(
            Q(a_switch=switch, b_nic__node__role=NodeRole.COMPUTE)
            | Q(b_switch=switch, a_nic__node__role=NodeRole.COMPUTE)
        ).select_related("a_nic__node", "b_nic__node")
        nics = {}
        for cable in cables:
            nic = cable.b_nic if cable.a_switch_id == switch.pk else cable.a_nic
            nics.setdefault(nic.node_id, nic)
        if len(nics) > len(best_nics):
            best, best_nics = switch, [nics[key] for key in sorted(nics)]
    return best, best_nics


def generate(*, since: datetime, until: datetime, seed: int, faults: int = FAULTS) -> list[Fault]:
    """The campaign's faults over [since, until), oldest first: the same seed and inventory give the same campaign."""
    rng = random.Random(seed)
    span = (until - since).total_seconds()
    gpus = list(Gpu.objects.filter(node__role=NodeRole.COMPUTE).select_related("node").order_by("pk"))
    cables = list(
        Cable.objects.filter(Q(a_nic__node__role=NodeRole.COMPUTE) | Q(b_nic__node__role=NodeRole.COMPUTE))
        .select_related("a_nic__node", "b_nic__node", "a_switch", "b_switch")
        .order_by("pk")
    )
    result: list[Fault] = []
    busy: dict[tuple, datetime | None] = {}  # (component, kind) -> until when an event of it is open

    def add(component, kind, severity, summary, at, transient):
        key = (type(component).__name__, component.pk, kind)
        if key in busy and (busy[key] is None or busy[key] > at):
            return  # one open event per component and kind, as the health state keeps it
        cleared = at + timedelta(hours=rng.uniform(1, 6)) if transient else None
        cleared = cleared if cleared is not None and cleared < until else None
        busy[key] = cleared
        result.append(Fault(component, kind, severity, summary, at, cleared, ClearedBy.VALIDATION if cleared else ""))

    weights = [share for _, _, _, share, _, _ in MIX]
    for _ in range(faults):
        kind, severity, part, _, transient, summary = rng.choices(MIX, weights=weights)[0]
        pool = gpus if part == "gpu" else cables
        if not pool:
            continue
        component = rng.choice(pool)
        at = since + timedelta(seconds=rng.uniform(0, span))
        label = f"GPU {component.index}: {summary}" if part == "gpu" else summary
        add(component, kind, severity, label, at, rng.random() < transient)
    switch, nics = leaf_nodes()
    if switch is not None:
        down = since + timedelta(seconds=rng.uniform(0.2, 0.8) * span)
        back = down + timedelta(hours=1)  # the switch is replaced: its nodes were fine all along
        back = back if back < until else None
        for second, nic in enumerate(nics):
            summary = f"{nic.name}: link down (leaf {switch.name})"
            at = down + timedelta(seconds=second)
            result.append(
                Fault(nic, "link_down", Severity.CRITICAL, summary, at, back, ClearedBy.VALIDATION if back else "")
            )
    return sorted(result, key=lambda fault: fault.first_seen)
