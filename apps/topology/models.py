"""The topology's derived state, stored when the inventory changes (as NetBox stores a CablePath when cables change)
and read by the topology page and the dashboard."""

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

from apps.core.models import TimestampedModel


class TopologyEvaluation(TimestampedModel):
    """The rules' outcome, the graph's summary and the map, worked out from the inventory as it was at `created`
    (apps.topology.services.record_topology, run on commit of a change to a node or the fabric, and every minute for
    what a bulk update changed). Append-only: the newest row is the cluster's; a few older ones are kept."""

    fingerprint = models.CharField(
        max_length=32, help_text="topology_fingerprint() of the inventory it was worked out from."
    )
    summary = models.JSONField(encoder=DjangoJSONEncoder, help_text="The graph's summary (GraphSummary's fields).")
    rules = models.JSONField(encoder=DjangoJSONEncoder, help_text="Each rule's result (RuleResult's fields), in order.")
    figure = models.JSONField(encoder=DjangoJSONEncoder, help_text="The map's Plotly figure (data and layout).")
    elapsed_ms = models.FloatField(help_text="How long the evaluation took.")

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["-created", "-id"], name="topologyevaluation_newest_idx")]

    def __str__(self) -> str:
        return f"topology evaluated at {self.created:%Y-%m-%d %H:%M:%S}"
