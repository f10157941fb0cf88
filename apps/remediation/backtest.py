"""Back-testing remediation policies (docs/health.md, "Back-testing"): before a policy change goes live, the recorded
health events of a window (and, if asked, a simulated fault campaign, apps/remediation/campaign.py) are replayed in
order through the production evaluator (services.evaluate, `queue=False`) for the policies in force and for the
candidate, and what each side did is reported: quarantines, breaker trips with their named cause, escalations and
false ones, refusals, GPU-hours lost.

Each replay runs inside a transaction that is always rolled back: the decisions, drains, scheduler jobs, synthetic
events and audit entries it writes are gone when it returns (nothing is enqueued: `queue=False`, and on-commit hooks of
a rolled-back transaction never run). What it sees in there:

- no earlier decision (a back-test starts clean at `since`), no node drained since `since`, and of the health events
  only those being replayed, each open from its `first_seen` to its recorded clearing (a campaign's: its own);
- the evaluator is called at each event's `first_seen`, oldest first, as the periodic task would have been;
- a node drained in the replay returns when every event it was drained for has cleared.

While a replay runs it holds locks on the rows it changes (policies, events, nodes); the window is bounded
(BACKTEST_MAX_DAYS) and so are the events (BACKTEST_MAX_EVENTS).
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Count

from apps.health.choices import ClearedBy, Source
from apps.health.costs import HOUR, failure_costs, total_gpu_hours
from apps.health.models import HealthEvent
from apps.health.services import Component
from apps.inventory.models import Gpu, Node
from apps.remediation import campaign as campaigns
from apps.remediation import services
from apps.remediation.choices import TAKES_NODE_OUT, Action, Outcome
from apps.remediation.models import RemediationDecision, RemediationPolicy

BACKTEST_MAX_DAYS = 90
BACKTEST_MAX_EVENTS = 2000


class BacktestRefused(ValueError):
    """The back-test cannot run as asked; `errors` names the fields."""

    def __init__(self, errors: dict[str, list[str]]):
        super().__init__(errors)
        self.errors = errors


@dataclass
class Side:
    """What one set of policies did in one replay."""

    policies: list[str]
    events: int = 0
    decisions: list[dict] = field(default_factory=list)
    quarantines: int = 0
    breaker_trips: list[dict] = field(default_factory=list)
    escalations: int = 0
    false_escalations: int = 0
    refusals: int = 0
    failed: int = 0
    quarantine_gpu_hours: float = 0.0
    work_gpu_hours: float = 0.0

    @property
    def gpu_hours_lost(self) -> float:
        return self.work_gpu_hours + self.quarantine_gpu_hours


@dataclass
class Replay:
    """One set of events (recorded, or a campaign's), replayed for the policies in force and for the candidate."""

    source: str  # "recorded" or "campaign"
    events: int
    in_force: Side
    candidate: Side


@dataclass
class Report:
    since: datetime
    until: datetime
    replays: list[Replay]


class _Rollback(Exception):
    def __init__(self, side: Side):
        self.side = side


def backtest(
    candidates: list[RemediationPolicy],
    *,
    since: datetime,
    until: datetime,
    campaign: int | None = None,
    canary_racks: dict[int, list] | None = None,
) -> Report:
    """Replays the window's recorded events (and a campaign seeded with `campaign`, when given) for the policies in
    force and for them with the candidates in (a candidate with the pk of a policy replaces it; one without joins).
    `canary_racks`: candidate index → its canary racks. Unsaved candidates stay unsaved; nothing is left behind."""
    errors = {}
    if until <= since:
        errors["until"] = ["The window's end must come after its start."]
    elif until - since > timedelta(days=BACKTEST_MAX_DAYS):
        errors["since"] = [f"At most {BACKTEST_MAX_DAYS} days."]
    if not candidates:
        errors["policies"] = ["Give a candidate policy."]
    recorded = list(
        HealthEvent.objects.filter(first_seen__gte=since, first_seen__lt=until).values_list(
            "pk", "first_seen", "cleared_at", "cleared_by"
        )
    )
    if len(recorded) > BACKTEST_MAX_EVENTS:
        errors["since"] = [f"{len(recorded)} events in the window, more than {BACKTEST_MAX_EVENTS}: shorten it."]
    if errors:
        raise BacktestRefused(errors)
    replays = [_both(candidates, canary_racks or {}, since=since, until=until, recorded=recorded, seed=None)]
    if campaign is not None:
        replays.append(_both(candidates, canary_racks or {}, since=since, until=until, recorded=[], seed=campaign))
    return Report(since=since, until=until, replays=replays)


def _both(candidates, canary_racks, *, since, until, recorded, seed) -> Replay:
    in_force = _replay([], {}, since=since, until=until, recorded=recorded, seed=seed)
    candidate = _replay(candidates, canary_racks, since=since, until=until, recorded=recorded, seed=seed)
    return Replay("recorded" if seed is None else "campaign", in_force.events, in_force, candidate)


def _replay(candidates, canary_racks, *, since, until, recorded, seed) -> Side:
    """One side's replay, always rolled back; returns what it decided as plain data."""
    new = [candidate for candidate in candidates if candidate.pk is None]
    try:
        with transaction.atomic():
            raise _Rollback(_run(candidates, canary_racks, since=since, until=until, recorded=recorded, seed=seed))
    except _Rollback as done:
        return done.side
    finally:
        for candidate in new:  # saved only in the rolled-back transaction: unsaved again
            candidate.pk, candidate._state.adding = None, True


def _run(candidates, canary_racks, *, since, until, recorded, seed) -> Side:
    RemediationDecision.objects.all().delete()
    Node.objects.filter(drained_at__gte=since).update(drained_at=None, drain_reason="", drained_until=None)
    for index, candidate in enumerate(candidates):
        candidate.save()
        if index in canary_racks:
            candidate.canary_racks.set(canary_racks[index])
    replayed = list(recorded)
    # Only the replayed events are ever open in here: the rest are closed for its length.
    others = HealthEvent.objects.open().exclude(pk__in=[row[0] for row in replayed])
    others.update(cleared_at=since, cleared_by=ClearedBy.VALIDATION)
    if seed is not None:
        replayed = _campaign_events(since=since, until=until, seed=seed)
    side = Side(
        policies=[p.name for p in RemediationPolicy.objects.filter(enabled=True).order_by("name")], events=len(replayed)
    )
    ends = {pk: (cleared, by) for pk, _, cleared, by in replayed}
    pks = list(ends)
    HealthEvent.objects.filter(pk__in=pks).update(cleared_at=since, cleared_by=ClearedBy.VALIDATION)
    opened: set[int] = set()
    drained: dict[int, dict] = {}  # node pk -> {"since", "events"}: drains (or in shadow would-be drains) of the replay
    spans: list[tuple[int, datetime, datetime]] = []
    decisions: list[RemediationDecision] = []
    for moment in sorted({first_seen for _, first_seen, _, _ in replayed}):
        now_open = {
            pk for pk, first, cleared, _ in replayed if first <= moment and (cleared is None or cleared > moment)
        }
        HealthEvent.objects.filter(pk__in=opened - now_open).update(cleared_at=moment, cleared_by=ClearedBy.VALIDATION)
        HealthEvent.objects.filter(pk__in=now_open - opened).update(cleared_at=None, cleared_by="")
        opened = now_open
        _returns(drained, spans, ends, moment)
        made = services.evaluate(now=moment, queue=False)
        decisions.extend(made)
        for decision in made:
            if decision.action in TAKES_NODE_OUT and decision.outcome in services.DONE and decision.node_id:
                drained.setdefault(decision.node_id, {"since": decision.decided_at, "events": set()})["events"].add(
                    decision.event_id
                )
    _returns(drained, spans, ends, until)
    for pk, held in drained.items():
        spans.append((pk, held["since"], until))
    _tally(side, decisions, ends, spans)
    # The work the failures cost their jobs (the same for both sides); the drains are the replay's own (above).
    costs = failure_costs(HealthEvent.objects.filter(pk__in=pks).select_related("node"), now=until).values()
    for cost in costs:
        cost.losses = cost.work
    side.work_gpu_hours = total_gpu_hours(costs)
    return side


def _returns(drained: dict, spans: list, ends: dict, moment: datetime) -> None:
    """Nodes whose drain's events have all cleared by `moment` return (in the replay's database too)."""
    for pk in list(drained):
        held = drained[pk]
        clears = [ends[event][0] for event in held["events"]]
        if clears and all(cleared is not None and cleared <= moment for cleared in clears):
            back = max(clears)
            spans.append((pk, held["since"], back))
            Node.objects.filter(pk=pk).update(drained_at=None, drain_reason="", drained_until=None)
            del drained[pk]


def _tally(side: Side, decisions: list[RemediationDecision], ends: dict, spans: list) -> None:
    gpus = dict(_gpu_counts({pk for pk, _, _ in spans}))
    side.quarantine_gpu_hours = sum(
        max(0.0, (end - start).total_seconds()) * gpus.get(pk, 0) / HOUR for pk, start, end in spans
    )
    for decision in decisions:
        node = decision.node.hostname if decision.node_id else ""
        row = {
            "event": str(decision.event.public_id),
            "kind": decision.kind,
            "node": node,
            "policy": decision.policy.name,
            "mode": decision.mode,
            "action": decision.action,
            "escalated": decision.escalated,
            "outcome": decision.outcome,
            "reason": decision.reason,
            "decided_at": decision.decided_at,
        }
        side.decisions.append(row)
        if decision.outcome in services.DONE and decision.action == Action.QUARANTINE:
            side.quarantines += 1
        if decision.outcome == Outcome.FAILED:
            side.failed += 1
        if decision.outcome == Outcome.REFUSED:
            side.refusals += 1
            if decision.reason.startswith(services.BREAKER_TRIPPED):
                leaf = services.SUSPECT_LEAF.search(decision.reason)
                side.breaker_trips.append(
                    {"node": node, "at": decision.decided_at, "cause": leaf.group("leaf") if leaf else ""}
                )
        if decision.escalated and decision.outcome in services.DONE:
            side.escalations += 1
            cleared, by = ends.get(decision.event_id, (None, ""))
            if cleared is not None and by == ClearedBy.VALIDATION:
                side.false_escalations += 1  # a validation cleared it: the repair it asked for was not needed


def _gpu_counts(node_pks):
    return Gpu.objects.filter(node_id__in=node_pks).values_list("node_id").annotate(n=Count("pk")).order_by()


def _campaign_events(*, since, until, seed) -> list[tuple]:
    """The campaign's events, created closed (the replay opens each at its time): (pk, first_seen, cleared, by)."""
    rows = []
    for fault in campaigns.generate(since=since, until=until, seed=seed):
        component = Component.of(fault.component)
        event = HealthEvent.objects.create(
            component_type=component.type,
            component_key=component.key,
            component_label=component.label,
            node=component.node,
            **component.links,
            source=Source.TELEMETRY,
            sources=[Source.TELEMETRY],
            kind=fault.kind,
            severity=fault.severity,
            summary=fault.summary[:300],
            first_seen=fault.first_seen,
            last_seen=fault.first_seen,
            cleared_at=since,
            cleared_by=ClearedBy.VALIDATION,
            clear_reason="simulated campaign",
        )
        rows.append((event.pk, fault.first_seen, fault.cleared_at, fault.cleared_by))
    return rows
