"""Deployment pages: the list, the five-stage wizard (nodes, versions, review, approve, run), the running view
(phase progress, node x step matrix over every run, the current run live, suggestions), and the acceptance report.

Views are thin: every change goes through apps.deployments.services, whose errors land on the form fields."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST
from rest_framework import serializers

from apps.accounts.choices import Role
from apps.accounts.decorators import role_required
from apps.core.api import errors_beyond_shape
from apps.core.listing import Listing
from apps.core.text import counted
from apps.deployments import cluster, node_operations, report, services
from apps.deployments.catalogue import option_rows
from apps.deployments.choices import OUTCOME_COLOURS, DeploymentState, Outcome, Phase, SuggestionState, WizardStage
from apps.deployments.context import StoredPlanInvalid
from apps.deployments.filters import DEPLOYMENT_COLUMNS, DeploymentFilterSet, latest_run
from apps.deployments.forms import ApproveForm, CriteriaForm, NodesForm, RebootForm, VersionsForm, add_service_errors
from apps.deployments.kinds.reboot import KIND as REBOOT_KIND
from apps.deployments.models import Deployment, Suggestion, Verdict
from apps.deployments.steps import STEPS
from apps.inventory.models import Node
from apps.jobs import services as job_services
from apps.jobs.choices import JOB_STATUS_COLOURS, JOB_TERMINAL
from apps.jobs.views import live_context

STAGES = list(WizardStage)


def _deployment(request, public_id) -> Deployment:
    # A pure read: the job's end (the deploy kind's job_finished) is what moves a deployment's state.
    return get_object_or_404(Deployment.objects.visible_to(request.user), public_id=public_id)


def _data(request):
    # Not `request.POST or None`: a POST with every box unticked is empty and must still be a bound form.
    return request.POST if request.method == "POST" else None


def _require_operator_for_post(request) -> None:
    if request.method == "POST" and not request.user.has_role(Role.OPERATOR):
        raise PermissionDenied("This needs the operator role.")


def _wizard(request, deployment, stage: str, context: dict, status: int = 200):
    reached = STAGES.index(WizardStage(deployment.stage)) if deployment else 0
    steps = [
        {
            "stage": s,
            "number": index + 1,
            "current": s == stage,
            "url": reverse("deployment-wizard", args=[deployment.public_id, s.value]) if deployment else "",
            "reachable": deployment is not None and (index <= reached or not deployment.is_draft),
        }
        for index, s in enumerate(STAGES)
    ]
    index = STAGES.index(WizardStage(stage))
    back = STAGES[index - 1].value if index > 0 and deployment else ""
    context = {
        "deployment": deployment,
        "stage": stage,
        "stepper": steps,
        "back_url": reverse("deployment-wizard", args=[deployment.public_id, back]) if back else "",
        "editable": deployment is None or deployment.is_draft,
        "may_write": request.user.has_role(Role.OPERATOR),
        **context,
    }
    return render(request, f"deployments/wizard_{stage}.html", context, status=status)


# --- list -------------------------------------------------------------------------------------------------------------


@login_required
def deployment_list(request):
    deployments = (
        Deployment.objects.visible_to(request.user)
        .select_related("created_by")
        .prefetch_related("runs__job")
        .annotate(node_count=Count("nodes", distinct=True))
    )
    shown = Listing.from_filters(  # the same filters as GET /api/deployments/
        request,
        DeploymentFilterSet,
        deployments,
        DEPLOYMENT_COLUMNS,
        default_sort="-created",
        per_page=50,
        filename="deployments",
    )
    return shown.respond(
        "deployments/deployment_list.html",
        lambda context: {
            "rows": [{"deployment": d, "run": latest_run(d)} for d in context["object_list"]],
            "state": request.GET.get("state", ""),
            "states": DeploymentState.choices,
        },
    )


# --- the wizard -------------------------------------------------------------------------------------------------------


@role_required(Role.OPERATOR)
def deployment_new(request):
    form = NodesForm(_data(request))
    if request.method == "POST" and not form.is_valid():
        found = errors_beyond_shape(
            form.errors,
            form.cleaned_data,
            lambda data, refused: services.creation_errors(
                name=data.get("name"), targets=form.known_targets(refused), transport=data.get("transport") or None
            ),
        )
        add_service_errors(form, found, aliases=NodesForm.ALIASES)
    elif request.method == "POST":
        data = form.cleaned_data
        try:
            deployment = services.create_deployment(
                name=data["name"],
                description=data["description"],
                targets=form.targets(),
                user=request.user,
                transport=data["transport"],
            )
        except serializers.ValidationError as error:
            add_service_errors(form, error.detail, aliases=NodesForm.ALIASES)
        else:
            messages.success(
                request, f"Draft {deployment.name} created on {counted(deployment.nodes.count(), 'node')}."
            )
            return redirect("deployment-wizard", deployment.public_id, WizardStage.VERSIONS)
    status = 400 if form.errors else 200
    return _wizard(request, None, WizardStage.NODES, {"form": form}, status=status)


@login_required
def deployment_wizard(request, public_id, stage):
    if stage not in WizardStage.values:
        raise Http404("No such stage.")
    _require_operator_for_post(request)
    deployment = _deployment(request, public_id)
    handler = {
        WizardStage.NODES: _stage_nodes,
        WizardStage.VERSIONS: _stage_versions,
        WizardStage.REVIEW: _stage_review,
        WizardStage.APPROVE: _stage_approve,
        WizardStage.RUN: _stage_run,
    }[WizardStage(stage)]
    if request.method == "POST" and stage != WizardStage.RUN and not deployment.is_draft:
        messages.error(request, f"The plan is {deployment.get_state_display().lower()}; only a draft can be changed.")
        return redirect("deployment-detail", deployment.public_id)
    try:
        return handler(request, deployment)
    except StoredPlanInvalid as error:
        messages.error(request, str(error))
        return redirect("deployment-wizard", deployment.public_id, WizardStage.VERSIONS)


def _advance(deployment, stage: str):
    """Remember how far the wizard got (a draft reopens there) without moving back."""
    if deployment.is_draft and STAGES.index(WizardStage(deployment.stage)) < STAGES.index(WizardStage(stage)):
        services.update_deployment(deployment=deployment, stage=stage)
    return redirect("deployment-wizard", deployment.public_id, stage)


def _stage_nodes(request, deployment):
    form = NodesForm(_data(request), initial=NodesForm.initial_for(deployment), editing=True)
    if request.method == "POST" and not form.is_valid():
        found = _update_errors(form, deployment, targets=form.known_targets(set(form.errors)))
        add_service_errors(form, found, aliases=NodesForm.ALIASES)
    elif request.method == "POST":
        try:
            services.update_deployment(
                deployment=deployment, targets=form.targets(), description=form.cleaned_data["description"]
            )
        except serializers.ValidationError as error:
            add_service_errors(form, error.detail, aliases=NodesForm.ALIASES)
        else:
            return _advance(deployment, WizardStage.VERSIONS)
    status = 400 if form.errors else 200
    nodes = deployment.nodes.order_by("hostname").values_list("hostname", flat=True)
    return _wizard(request, deployment, WizardStage.NODES, {"form": form, "nodes": list(nodes)}, status=status)


def _stage_versions(request, deployment):
    form = VersionsForm(_data(request), initial=VersionsForm.initial_for(deployment))
    if request.method == "POST" and not form.is_valid():
        add_service_errors(form, _update_errors(form, deployment, option_edits=form.option_edits()))
    elif request.method == "POST":
        try:
            services.update_deployment(
                deployment=deployment, option_edits=form.option_edits(), stage=_later(deployment, WizardStage.REVIEW)
            )
        except serializers.ValidationError as error:
            add_service_errors(form, error.detail)
        else:
            return redirect("deployment-wizard", deployment.public_id, WizardStage.REVIEW)
    status = 400 if form.errors else 200
    return _wizard(request, deployment, WizardStage.VERSIONS, {"form": form}, status=status)


def _update_errors(form, deployment, **parts) -> dict:
    """A wizard form its shape refused: what the draft's checks say of the parts made of the fields that passed."""

    def check(data: dict, refused: set[str]) -> dict:  # the parts are made of `data`, the fields that passed
        return services.update_errors(deployment=deployment, **parts)

    return errors_beyond_shape(form.errors, form.cleaned_data, check)


def _later(deployment, stage: str) -> str:
    current = WizardStage(deployment.stage)
    return stage if STAGES.index(current) < STAGES.index(WizardStage(stage)) else current.value


def _stage_review(request, deployment):
    form = CriteriaForm(_data(request), criteria=deployment.criteria)
    if request.method == "POST" and not form.is_valid():
        form.add_service_errors(_update_errors(form, deployment, criteria_edits=form.criteria_edits()))
    elif request.method == "POST":
        try:
            services.update_deployment(
                deployment=deployment,
                criteria_edits=form.criteria_edits(),
                stage=_later(deployment, WizardStage.APPROVE),
            )
        except serializers.ValidationError as error:
            form.add_service_errors(error.detail)
        else:
            if "save" in request.POST:
                messages.success(request, "Acceptance criteria saved.")
                return redirect("deployment-wizard", deployment.public_id, WizardStage.REVIEW)
            return redirect("deployment-wizard", deployment.public_id, WizardStage.APPROVE)
    status = 400 if form.errors else 200
    plan = services.dry_run(deployment)
    for node in plan:
        for step in node["steps"]:
            step["phase_label"] = Phase(step["phase"]).label
    context = {
        "form": form,
        "plan": plan,
        "artefacts": services.plan_artefacts(deployment),
        "versions": option_rows(deployment.options, "versions"),
        "baselines": option_rows(deployment.options, "baselines"),
    }
    return _wizard(request, deployment, WizardStage.REVIEW, context, status=status)


def _same_commands(by_node: dict[str, list[str]]) -> list[tuple[list[str], list[str]]]:
    """Nodes that would run the very same commands, together: one row for a rack of identical nodes."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for hostname, commands in sorted(by_node.items()):
        groups.setdefault(tuple(commands), []).append(hostname)
    return [(hostnames, list(commands)) for commands, hostnames in groups.items()]


def _stage_approve(request, deployment):
    commands = services.disruptive_commands(deployment)
    form = ApproveForm(_data(request), steps=list(commands))
    if request.method == "POST" and form.is_valid():
        try:
            services.approve(deployment=deployment, user=request.user, steps=form.cleaned_data["steps"])
        except serializers.ValidationError as error:
            add_service_errors(form, error.detail)
        else:
            messages.success(request, "Plan approved. Start it when you are ready.")
            return redirect("deployment-wizard", deployment.public_id, WizardStage.RUN)
    disruptive = [
        {
            "step": STEPS[name],
            "field": next((w for w in form["steps"] if w.data["value"] == name), None),
            "groups": _same_commands(by_node),
            "node_count": len(by_node),
        }
        for name, by_node in commands.items()
    ]
    status = 400 if form.errors else 200
    return _wizard(
        request,
        deployment,
        WizardStage.APPROVE,
        {"form": form, "disruptive": disruptive, "node_count": deployment.nodes.count()},
        status=status,
    )


def _stage_run(request, deployment):
    if request.method == "POST":
        try:
            services.start(deployment=deployment, user=request.user)
        except serializers.ValidationError as error:
            messages.error(request, _flatten(error.detail))
            return redirect("deployment-wizard", deployment.public_id, WizardStage.RUN)
        return redirect("deployment-detail", deployment.public_id)
    context = {"approvals": list(services.approvals(deployment)), "node_count": deployment.nodes.count()}
    return _wizard(request, deployment, WizardStage.RUN, context)


def _flatten(detail) -> str:
    if isinstance(detail, dict):
        return "; ".join(f"{key}: {_flatten(value)}" for key, value in detail.items())
    if isinstance(detail, list | tuple):
        return " ".join(_flatten(item) for item in detail)
    return str(detail)


@login_required
def artefact_download(request, public_id, name):
    deployment = _deployment(request, public_id)
    try:
        chosen = next(iter(services.plan_artefacts(deployment, only=name)), None)
    except StoredPlanInvalid as error:
        return HttpResponse(str(error), status=409, content_type="text/plain; charset=utf-8")
    if chosen is None:
        raise Http404("No such artefact.")
    response = HttpResponse(chosen.content, content_type=chosen.media_type)
    response["Content-Disposition"] = f'attachment; filename="{chosen.filename.rsplit("/", 1)[-1]}"'
    return response


# --- the running view -------------------------------------------------------------------------------------------------


@login_required
def deployment_detail(request, public_id):
    deployment = _deployment(request, public_id)
    if deployment.is_draft:
        return redirect("deployment-wizard", deployment.public_id, deployment.stage)
    if deployment.stage == WizardStage.RUN and not deployment.runs.exists():
        return redirect("deployment-wizard", deployment.public_id, WizardStage.RUN)
    context = _summary_context(request, deployment)
    if request.headers.get("HX-Request"):
        return render(request, "deployments/partials/summary.html", context)
    run = context["run"]  # the run the summary judged "Finishing" by: the live panel shows the same job
    if run is not None:
        context.update(_live_context(run.job, request.GET))
    return render(request, "deployments/deployment_detail.html", context)


def _suggestions_context(request, deployment) -> dict:
    """The suggestions panel's: what awaits a decision (or a resume), and what was settled."""
    suggestions = list(
        Suggestion.objects.filter(deployment=deployment).select_related("run", "decided_by").order_by("-created", "id")
    )
    awaiting = [s for s in suggestions if s.state in (SuggestionState.OPEN, SuggestionState.APPROVED)]
    return {
        "deployment": deployment,
        "suggestions": awaiting,
        # An approved fix is no longer open: it waits for the next resume (the counter says so apart).
        "open_count": sum(s.state == SuggestionState.OPEN for s in awaiting),
        "approved_count": sum(s.state == SuggestionState.APPROVED for s in awaiting),
        "settled": [s for s in suggestions if s.state not in (SuggestionState.OPEN, SuggestionState.APPROVED)],
        "may_write": request.user.has_role(Role.OPERATOR),
    }


def _summary_context(request, deployment) -> dict:
    grid = services.matrix(deployment)
    outcomes = grid["outcomes"]
    rows = []
    for hostname in grid["hostnames"]:
        cells = []
        for step in grid["steps"]:
            outcome, number = outcomes.get((hostname, step), ("", 0))
            cells.append(
                {
                    "hostname": hostname,
                    "step": step,
                    "outcome": outcome or "not run",
                    "run": number,
                    "colour": OUTCOME_COLOURS[Outcome(outcome)] if outcome else "grey",
                    "phase": int(STEPS[step].phase),
                }
            )
        rows.append((hostname, cells))
    phases = []
    for phase, counts in sorted(grid["phases"].items()):
        percent = round(100 * counts["verified"] / counts["total"]) if counts["total"] else 0
        phases.append({"phase": Phase(phase), **counts, "percent": percent})
    acceptance = cluster.panel(deployment)
    if acceptance["enabled"]:
        verified, total = acceptance["verified"], acceptance["total"]
        phases.append(
            {
                "phase": Phase.CLUSTER_ACCEPTANCE,
                "verified": verified,
                "total": total,
                "percent": round(100 * verified / total),
            }
        )
    failed = deployment.state in ("failed", "canceled")
    # Between the commit that ends a run's job and its job_finished hook settling the deployment, the two disagree:
    # say "Finishing" then, never "Running" beside a run that has ended.
    run = deployment.latest_run
    settling = deployment.state == DeploymentState.RUNNING and run is not None and run.job.status in JOB_TERMINAL
    clustering = settling and acceptance["pending"]  # the per-node run is over; phase 5 runs its benchmarks
    settling = settling and not clustering
    return {
        **_suggestions_context(request, deployment),
        "run": run,
        "state": "settling" if settling else deployment.state,
        "state_label": "Finishing"
        if settling
        else ("Running: cluster acceptance" if clustering else deployment.get_state_display()),
        "state_colour": "grey" if settling else deployment.colour,
        "phases": phases,
        "columns": [(name, STEPS[name].label) for name in grid["steps"]],
        "matrix_rows": rows,
        "may_resume": failed and request.user.has_role(Role.OPERATOR),
        "counts": grid["counts"],
        "outcome_colours": OUTCOME_COLOURS,
        "cluster": acceptance,
        "may_rerun_cluster": acceptance["enabled"]
        and bool(acceptance["checks"])
        and not acceptance["pending"]
        and request.user.has_role(Role.OPERATOR),
    }


def _live_context(job, params) -> dict:
    """The current run's job as jobs.js follows it (the same ids, matrix window and initial data as the job page)."""
    live = live_context(job, params)
    return {
        "job": job,
        "job_colour": JOB_STATUS_COLOURS.get(job.status, "grey"),
        "job_columns": live["columns"],
        "job_rows": live["rows"],
        "progress": live["progress"],
        "matrix": live["matrix"],
        "status_counts": live["status_counts"],
        "initial": live["initial"],
    }


@login_required
def cell_verdicts(request, public_id, hostname, step):
    """One cell of the all-runs matrix: the verdicts of the latest run that judged it, with a link to its output."""
    deployment = _deployment(request, public_id)
    if step not in STEPS:
        raise Http404("No such step.")
    outcome, number = services.cell_outcomes(deployment).get((hostname, step), ("", 0))
    verdicts = list(
        Verdict.objects.filter(deployment=deployment, hostname=hostname, step=step, run__number=number).select_related(
            "run__job"
        )
    )
    run = verdicts[0].run if verdicts else None
    context = {"deployment": deployment, "hostname": hostname, "step": STEPS[step], "outcome": outcome}
    context.update({"verdicts": verdicts, "run": run})
    return render(request, "deployments/partials/cell_verdicts.html", context)


@require_POST
@role_required(Role.OPERATOR)
def deployment_resume(request, public_id):
    deployment = _deployment(request, public_id)
    try:
        run = services.resume(deployment=deployment, user=request.user)
    except serializers.ValidationError as error:
        messages.error(request, _flatten(error.detail))
    else:
        messages.success(request, f"Run {run.number} started on {counted(run.job.node_count, 'node')}.")
    return redirect("deployment-detail", deployment.public_id)


@login_required
def cluster_panel(request, public_id):
    """Phase 5's panel alone: htmx polls it while its benchmarks run."""
    deployment = _deployment(request, public_id)
    return render(request, "deployments/partials/cluster.html", _summary_context(request, deployment))


@require_POST
@role_required(Role.OPERATOR)
def cluster_rerun(request, public_id):
    deployment = _deployment(request, public_id)
    try:
        checks = services.rerun_cluster_acceptance(deployment=deployment, user=request.user)
    except serializers.ValidationError as error:
        messages.error(request, _flatten(error.detail))
    else:
        messages.success(request, f"Cluster acceptance queued (attempt {checks[0].attempt}).")
    return redirect("deployment-detail", deployment.public_id)


@login_required
def suggestion_list(request, public_id):
    """The suggestions panel alone (htmx refreshes it when a run ends)."""
    deployment = _deployment(request, public_id)
    return render(request, "deployments/partials/suggestions.html", _suggestions_context(request, deployment))


@require_POST
@role_required(Role.OPERATOR)
def suggestion_decide(request, public_id, decision):
    suggestion = get_object_or_404(Suggestion.objects.select_related("deployment"), public_id=public_id)
    decide = {"approve": services.approve_suggestion, "dismiss": services.dismiss_suggestion}.get(decision)
    if decide is None:
        raise Http404("No such decision.")
    try:
        decide(suggestion=suggestion, user=request.user)
    except serializers.ValidationError as error:
        messages.error(request, _flatten(error.detail))
    else:
        if decision == "approve":
            text = f"Fix approved for {suggestion.hostname}: the next resume runs {suggestion.remediation_step} there."
        else:
            text = f"Dismissed: {suggestion.title}."
        messages.success(request, text)
    return redirect("deployment-detail", suggestion.deployment.public_id)


# --- the acceptance report --------------------------------------------------------------------------------------------


@login_required
def deployment_report(request, public_id):
    deployment = _deployment(request, public_id)
    return HttpResponse(report.html(deployment, standalone=False, request=request))


@login_required
def report_download(request, public_id):
    return report.html_download(_deployment(request, public_id), signed_by=request.user.get_username())


# --- node operations started from the node page (its sections: apps/deployments/node_page.py) -----------------


@require_POST
@role_required(Role.OPERATOR)
def node_reboot(request, public_id):
    node = get_object_or_404(Node, public_id=public_id)
    form = RebootForm(request.POST)
    try:
        if not form.is_valid():
            raise serializers.ValidationError(form.errors)
        job = job_services.create_job(
            kind=REBOOT_KIND,
            targets=job_services.TargetSpec(nodes=(node.hostname,)),
            parameters={"force": form.cleaned_data["force"]},
            requested_by=request.user,
        )
    except serializers.ValidationError as error:
        messages.error(request, f"{node.hostname} was not rebooted: {_flatten(error.detail)}")
        return redirect("node-detail", public_id=node.public_id)
    messages.success(request, f"Reboot of {node.hostname} started: the job below shows each step as it runs.")
    return redirect("job-page", public_id=job.public_id)


@require_POST
@role_required(Role.OPERATOR)
def node_scheduler_action(request, public_id):
    """Tell the scheduler what the node page shows: drain it (with its reason) or return it to service."""
    node = get_object_or_404(Node, public_id=public_id)
    try:
        job = node_operations.start_scheduler_action(node=node, requested_by=request.user)
    except serializers.ValidationError as error:
        messages.error(request, f"The scheduler was not told about {node.hostname}: {_flatten(error.detail)}")
        return redirect("node-detail", public_id=node.public_id)
    return redirect("job-page", public_id=job.public_id)
