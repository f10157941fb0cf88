"""The topology page: the map, the rule results and the graph summary. Thin: services and charts do the work."""

from dataclasses import dataclass, field

from django.contrib.auth.mixins import LoginRequiredMixin
from django.utils import timezone
from django.views.generic import TemplateView

from apps.core.units import link_rate
from apps.topology.charts import colour_key, figure_json, topology_figure
from apps.topology.choices import VERDICT_COLOURS, Verdict
from apps.topology.rules import RuleResult
from apps.topology.services import evaluate_topology, newest_evaluation, recorded_rules, recorded_summary

FACT_LABELS = {
    "threshold_gbps": "Threshold (Gb/s)",
    "min_pair_gbps": "Minimum between two nodes, whole fabric (Gb/s)",
    "min_pair": "Pair at the minimum",
    "pairs_below": "Pairs below the threshold",
    "max_flows": "Max-flow computations",
    "elapsed_ms": "Computed in (ms)",
    "offending_count": "Elements named",
    "max_ratio": "Highest ratio allowed",
    "worst_ratio": "Worst ratio",
}
MAX_LIST_IN_FACT = 12


def _pairs(examples) -> str:
    return ", ".join(f"{a} ↔ {b}: {link_rate(value)}" for a, b, value in examples) or "—"


FACT_FORMATTERS = {
    "examples": _pairs,
    "min_pair": lambda pair: " ↔ ".join(pair) or "—",
    "worst_ratio": lambda ratio: "a leaf without uplinks" if ratio is None else f"{ratio:g}:1",
    "max_ratio": lambda ratio: f"{ratio:g}:1",
}


@dataclass
class RulePresentation:
    """A rule result laid out for the template: scalar figures as facts, per-element figures as tables."""

    rule: RuleResult
    verdict_label: str
    colour: str
    facts: list[tuple[str, str]] = field(default_factory=list)
    tables: list[dict] = field(default_factory=list)
    more_offending: int = 0


def _text(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if value is None:
        return "—"
    if isinstance(value, list | tuple):
        items = [
            " ↔ ".join(_text(v) for v in item) if isinstance(item, list | tuple) else _text(item) for item in value
        ]
        shown = ", ".join(items[:MAX_LIST_IN_FACT])
        return shown + (f" and {len(items) - MAX_LIST_IN_FACT} more" if len(items) > MAX_LIST_IN_FACT else "") or "—"
    if isinstance(value, dict):
        return ", ".join(f"{key}: {_text(item)}" for key, item in value.items()) or "—"
    return str(value)


def present_rule(rule: RuleResult) -> RulePresentation:
    presented = RulePresentation(
        rule=rule,
        verdict_label=Verdict(rule.verdict).label,
        colour=VERDICT_COLOURS[Verdict(rule.verdict)],
        more_offending=max(0, rule.offending_count - len(rule.offending)),
    )
    for key, value in rule.figures.items():
        label = FACT_LABELS.get(key, key.replace("_", " ").capitalize())
        if isinstance(value, dict) and value and all(isinstance(item, dict) for item in value.values()):
            columns = list(next(iter(value.values())))
            rows = [[name] + [_text(item.get(column)) for column in columns] for name, item in value.items()]
            presented.tables.append(
                {"title": label, "columns": [""] + [c.replace("_", " ") for c in columns], "rows": rows}
            )
        else:
            presented.facts.append((label, FACT_FORMATTERS.get(key, _text)(value)))
    return presented


def topology_page() -> dict:
    """The page's summary, presented rules and map: the newest recorded evaluation (worked out when the inventory
    changed, apps.topology.services.record_topology), so a view reads one row. Before the first record (a fresh
    install, before the periodic loop's first pass) the inventory is evaluated here, and nothing is written."""
    evaluation = newest_evaluation()
    if evaluation is None:
        report = evaluate_topology()
        return {
            "report": {"elapsed_ms": report.elapsed_ms, "computed": timezone.now()},
            "summary": report.summary,
            "rules": [present_rule(rule) for rule in report.rules],
            "figure": figure_json(topology_figure(report.cluster, report.rules)),
        }
    return {
        "report": {"elapsed_ms": evaluation.elapsed_ms, "computed": evaluation.created},
        "summary": recorded_summary(evaluation),
        "rules": [present_rule(rule) for rule in recorded_rules(evaluation)],
        "figure": figure_json(evaluation.figure),
    }


class TopologyView(LoginRequiredMixin, TemplateView):
    template_name = "topology/topology.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context.update(topology_page(), colour_key=colour_key())
        return context
