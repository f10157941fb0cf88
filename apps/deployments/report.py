"""The acceptance report: every node's verdicts with criteria and evidence, the plan's versions and baselines, and
who approved what. One source for the page, the downloadable HTML file and the API."""

from collections import defaultdict
from collections.abc import Callable

from django.http import HttpResponse
from django.template.loader import render_to_string
from django.utils import timezone

from apps.core import signing
from apps.deployments import cluster, services
from apps.deployments.catalogue import option_rows
from apps.deployments.choices import (
    OUTCOME_RANK,
    VERIFIED_OUTCOMES,
    ApprovalScope,
    Comparator,
    Outcome,
    SuggestionState,
)
from apps.deployments.models import Verdict
from apps.deployments.recording import cell_outcomes
from apps.deployments.steps import STEPS

# What other apps add to the report about the deployment's nodes, registered by the wiring (portal/reports.py):
# monitoring's business validation of the inference services the nodes serve. Each source takes the host names and
# returns blocks with at least "service" and "outcome" (pass, warn, fail, could_not_run or "not run").
BUSINESS_VALIDATION_SOURCES: list[Callable[[list[str]], list[dict]]] = []
BLOCKING_OUTCOMES = {Outcome.FAIL, Outcome.COULD_NOT_RUN}


def register_business_validation(source: Callable[[list[str]], list[dict]]) -> Callable:
    if source not in BUSINESS_VALIDATION_SOURCES:
        BUSINESS_VALIDATION_SOURCES.append(source)
    return source


def business_validation(hostnames: list[str]) -> list[dict]:
    return [block for source in BUSINESS_VALIDATION_SOURCES for block in source(hostnames)]


def _node_order(node: dict) -> tuple:
    """Failures first, then could-not-run, not run, warnings, passes; by host name within each."""
    outcome = node["outcome"]
    rank = OUTCOME_RANK[Outcome(outcome)] if outcome in Outcome.values else 1.5
    return (-rank, node["hostname"])


def earlier_failures(deployment, latest_runs: dict) -> list[dict]:
    """Failures of runs whose cell a later run judged again, and how each ended: the cell's outcome now, in which run,
    and the fixes approved for it (a node that hit XID 79 in run 1 and passed after resume shows both)."""
    fixes = defaultdict(list)
    # A signed document states only what happened: who approved a fix comes from the approval itself (its name is
    # kept when the user is deleted); a suggestion that resolved with no approval (a cable fixed by hand) says so.
    approvers = defaultdict(list)
    for approval in deployment.approvals.filter(scope=ApprovalScope.FIX, suggestion__isnull=False).order_by("created"):
        approvers[approval.suggestion_id].append(approval.approved_by_name or "a since-deleted user")
    decided = deployment.suggestions.filter(state__in=[SuggestionState.APPROVED, SuggestionState.RESOLVED])
    for suggestion in decided.order_by("created", "id"):
        names = approvers.get(suggestion.pk)
        said = f"fix approved by {', '.join(names)}" if names else "no fix approved in Rackpilot"
        fixes[(suggestion.hostname, suggestion.step)].append(f"{suggestion.title} ({said})")
    failed = Verdict.objects.filter(deployment=deployment, outcome__in=[Outcome.FAIL, Outcome.COULD_NOT_RUN])
    rows = []
    for verdict in failed.select_related("run").order_by("run__number", "hostname", "step", "check_name"):
        outcome, number = latest_runs.get((verdict.hostname, verdict.step), (None, None))
        if number is None or number <= verdict.run.number:
            continue  # still the cell's latest judgement: it is in the node's own table
        rows.append(
            {
                "run": verdict.run.number,
                "hostname": verdict.hostname,
                "step": verdict.step,
                "check": verdict.check_name,
                "subject": verdict.subject,
                "outcome": verdict.outcome,
                "value": verdict.value,
                "now": outcome,
                "now_run": number,
                "fixes": fixes.get((verdict.hostname, verdict.step), []),
            }
        )
    return rows


def context(deployment) -> dict:
    public_key = signing.public_key_b64()
    latest_runs = cell_outcomes(deployment)
    verdicts = services.latest_verdicts(deployment)
    by_node: dict[str, list] = defaultdict(list)
    for verdict in verdicts:
        by_node[verdict.hostname].append(verdict)
    nodes = []
    hostnames = list(deployment.nodes.order_by("hostname").values_list("hostname", flat=True))
    business = business_validation(hostnames)
    for hostname in hostnames:
        rows = by_node.get(hostname, [])
        outcome = max((row.outcome for row in rows), key=lambda o: OUTCOME_RANK[Outcome(o)]) if rows else "not run"
        nodes.append({"hostname": hostname, "outcome": outcome, "verdicts": rows})
    nodes.sort(key=_node_order)
    history = earlier_failures(deployment, latest_runs)
    acceptance = cluster.panel(deployment)
    troubled = {row["hostname"] for row in history}
    counts = services.verdict_counts(deployment)
    # Clean passes are collapsed: at hundreds of nodes the report is about the few that are not.
    clean = [n for n in nodes if n["outcome"] == Outcome.PASS and n["hostname"] not in troubled]
    return {
        "deployment": deployment,
        "generated": timezone.now(),
        "nodes": nodes,
        "attention_nodes": [n for n in nodes if n not in clean],
        "clean_nodes": clean,
        "earlier_failures": history,
        "counts": counts,
        # The header's counts are of the nodes' cells: the outcomes that occur, beside the cluster phase's own outcome
        # (a "warn: 0" of the cells read as a contradiction of a cluster acceptance that warned).
        "node_counts": [(outcome, n) for outcome, n in counts.items() if n],
        "approvals": list(services.approvals(deployment)),
        "runs": list(deployment.runs.select_related("job", "started_by").order_by("number")),
        "step_labels": {name: step.label for name, step in STEPS.items()},
        "versions": option_rows(deployment.options, "versions"),
        "baselines": option_rows(deployment.options, "baselines"),
        "criteria": [
            (check, {**values, "comparator_label": Comparator(values.get("comparator", "ge")).label})
            for check, values in deployment.criteria.items()
        ],
        "business_validation": business,
        "cluster": acceptance,
        "cluster_history": [
            check
            for check in deployment.cluster_checks.select_related("run").order_by("run__number", "attempt", "id")
            if check not in acceptance["checks"]
        ],
        # A business validation that failed or could not run holds acceptance back; one not run yet does not.
        "accepted": bool(nodes)
        and all(node["outcome"] in VERIFIED_OUTCOMES for node in nodes)
        and not any(block["outcome"] in BLOCKING_OUTCOMES for block in business)
        # With cluster acceptance in the plan, it must have run and passed (a warning passes, with its note).
        and (not acceptance["enabled"] or acceptance["outcome"] in VERIFIED_OUTCOMES),
        "signing_public_key": public_key,
        "signing_fingerprint": signing.fingerprint(public_key),
    }


def as_json(deployment) -> dict:
    data = context(deployment)
    return {
        "deployment": deployment.name,
        "state": deployment.state,
        "state_label": deployment.get_state_display(),  # as the page and the deployment API name it
        "generated": data["generated"].isoformat(),
        "accepted": data["accepted"],
        "versions": deployment.options.get("versions", {}),
        "baselines": deployment.options.get("baselines", {}),
        "criteria": deployment.criteria,
        "counts": data["counts"],
        "approvals": [
            {
                "scope": a.scope,
                "step": a.step,
                "hostnames": a.hostnames,
                "by": a.approved_by_name,
                "at": a.created.isoformat(),
            }
            for a in data["approvals"]
        ],
        "earlier_failures": data["earlier_failures"],
        "business_validation": data["business_validation"],
        "cluster_acceptance": cluster.as_json(deployment),
        "nodes": [
            {
                "hostname": node["hostname"],
                "outcome": node["outcome"],
                "verdicts": [
                    {
                        "step": v.step,
                        "check": v.check_name,
                        "subject": v.subject,
                        "outcome": v.outcome,
                        "value": v.value,
                        "criterion": v.criterion,
                        "threshold": v.threshold,
                        "reference": v.reference,
                        "unit": v.unit,
                        "attempts": v.attempts,
                        "evidence": v.evidence,
                        "run": v.run.number,
                    }
                    for v in node["verdicts"]
                ],
            }
            for node in data["nodes"]
        ],
    }


def html(deployment, *, standalone: bool, request=None) -> str:
    """The report as HTML: in the portal's frame (with the request, for its navigation), or standalone to download."""
    data = {**context(deployment), "standalone": standalone}
    return render_to_string("deployments/report.html", data, request=request)


def html_download(deployment, *, signed_by: str) -> HttpResponse:
    """The standalone report, sealed with the portal's signature (`manage.py verify_report FILE` checks it)."""
    sealed = signing.seal(html(deployment, standalone=True).encode(), signed_by=signed_by)
    response = HttpResponse(sealed, content_type="text/html; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="acceptance-{deployment.name}.html"'
    return response
