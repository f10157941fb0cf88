"""What an incident cost: the failure costs (apps/health/costs.py) of the health events on its nodes while it was
open, each loss once, and the training job's work since its last checkpoint when the incident was opened."""

from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Q

from apps.diagnosis.models import Incident
from apps.health.costs import FailureCost, Loss, failure_costs, total_gpu_hours, work_lost
from apps.health.models import HealthEvent


@dataclass
class CostLine:
    """One loss, once, with every event that incurred it (two events of one outage share a drain or a job's work);
    no event: the training job's work lost at the incident's opening."""

    loss: Loss
    events: list[HealthEvent] = field(default_factory=list)


@dataclass
class IncidentCost:
    events: list[FailureCost] = field(default_factory=list)
    job: FailureCost | None = None  # the training job's lost work at the incident's opening, when it had a job

    @property
    def gpu_hours_lost(self) -> float:
        return total_gpu_hours([*self.events, *([self.job] if self.job else [])])

    @property
    def lines(self) -> list[CostLine]:
        """Each loss once, as the total counts it (its largest sighting): the job's first, then the events' in the
        order they were seen."""
        lines: dict[tuple, CostLine] = {}
        for event, cost in [*([(None, self.job)] if self.job else []), *((cost.event, cost) for cost in self.events)]:
            for loss in cost.losses:
                line = lines.setdefault(loss.key, CostLine(loss))
                if loss.gpu_hours > line.loss.gpu_hours:
                    line.loss = loss
                if event is not None:
                    line.events.append(event)
        return list(lines.values())

    @property
    def slo(self) -> list[dict] | None:
        """The SLO budgets the events burned (each SLO its largest share); None when none was measured."""
        measured = [burn for cost in self.events if cost.slo is not None for burn in cost.slo]
        if not any(cost.slo is not None for cost in self.events):
            return None
        worst: dict[str, dict] = {}
        for burn in measured:
            if burn["slo"] not in worst or (burn["budget_percent"] or 0) > (worst[burn["slo"]]["budget_percent"] or 0):
                worst[burn["slo"]] = burn
        return [worst[name] for name in sorted(worst)]


def incident_events(incident: Incident, *, now: datetime):
    """The health events on the incident's node, its suspects and its job's nodes that were open while it was."""
    end = incident.resolved_at or now
    nodes = {node.pk for node in incident.suspect_nodes.all()}
    if incident.node_id:
        nodes.add(incident.node_id)
    if incident.training_job_id:
        nodes |= set(incident.training_job.members.values_list("node_id", flat=True))
    return (
        HealthEvent.objects.filter(node__in=nodes, first_seen__lte=end)
        .filter(Q(cleared_at__isnull=True) | Q(cleared_at__gte=incident.created))
        .select_related("node")
        .order_by("first_seen", "pk")
    )


def incident_cost(incident: Incident, *, now: datetime) -> IncidentCost:
    events = list(incident_events(incident, now=now))
    cost = IncidentCost(events=list(failure_costs(events, now=now, slo=True).values()))
    if incident.training_job_id:
        loss = work_lost(incident.training_job, at=incident.created)
        if loss is not None:
            cost.job = FailureCost(event=None, losses=[loss])
    return cost
