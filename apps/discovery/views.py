"""Discovery pages: recent discovery jobs (and a button to start one), and one job's results per node."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST
from rest_framework import serializers

from apps.accounts.choices import Role
from apps.accounts.decorators import role_required
from apps.discovery import services
from apps.discovery.choices import DifferenceState
from apps.discovery.forms import DiscoverForm
from apps.discovery.models import Difference, NodeFacts
from apps.inventory.models import Node
from apps.jobs.models import Job


def _list_page(request, form: DiscoverForm, status: int = 200):
    page = Paginator(services.discovery_jobs(), 25).get_page(request.GET.get("page"))
    return render(request, "discovery/job_list.html", {"page": page, "form": form}, status=status)


@login_required
def job_list(request):
    form = DiscoverForm(initial={"scope": "all", "transport": settings.RACKPILOT_JOB_DEFAULT_TRANSPORT})
    return _list_page(request, form)


@require_POST
@role_required(Role.OPERATOR)
def start(request):
    form = DiscoverForm(request.POST)
    if not form.is_valid():
        return _list_page(request, form, status=400)
    try:
        job = services.start_discovery(
            targets=form.targets(), transport=form.cleaned_data["transport"], requested_by=request.user
        )
    except serializers.ValidationError as error:
        form.add_error(None, _flatten(error.detail))
        return _list_page(request, form, status=400)
    messages.success(request, f"Discovery of {job.node_count} node(s) started.")
    return redirect("job-page", job.public_id)


def _flatten(detail) -> str:
    if isinstance(detail, dict):
        return "; ".join(f"{key}: {_flatten(value)}" for key, value in detail.items())
    if isinstance(detail, list):
        return " ".join(_flatten(item) for item in detail)
    return str(detail)


@login_required
def job_detail(request, public_id):
    job = get_object_or_404(Job.objects.select_related("requested_by"), public_id=public_id, kind=services.KIND)
    snapshots = {facts.node_id: facts for facts in NodeFacts.objects.filter(job=job)}
    differences: dict[int, list[Difference]] = {}
    for difference in Difference.objects.filter(job=job).select_related("decided_by"):
        differences.setdefault(difference.node_id, []).append(difference)
    nodes = []
    for node in job.nodes.order_by("hostname"):
        rows = differences.get(node.pk, [])
        nodes.append(
            {
                "node": node,
                "facts": snapshots.get(node.pk),
                "differences": [d for d in rows if d.state != DifferenceState.FILLED],
                "filled": [d for d in rows if d.state == DifferenceState.FILLED],
                "open": sum(1 for d in rows if d.state == DifferenceState.OPEN),
            }
        )
    context = {"job": job, "nodes": nodes, "open_total": sum(item["open"] for item in nodes)}
    return render(request, "discovery/job_detail.html", context)


def _back(difference_or_job) -> str:
    job = getattr(difference_or_job, "job", difference_or_job)
    return redirect("discovery-job", job.public_id)


@require_POST
@role_required(Role.OPERATOR)
def accept(request, public_id):
    difference = get_object_or_404(Difference.objects.select_related("job", "node"), public_id=public_id)
    try:
        services.accept_difference(difference=difference, user=request.user)
        messages.success(request, f"Accepted: {difference}. The inventory now says {difference.discovered!r}.")
    except services.DecisionError as error:
        messages.error(request, str(error))
    return _back(difference)


@require_POST
@role_required(Role.OPERATOR)
def fix_node(request, public_id):
    difference = get_object_or_404(Difference.objects.select_related("job", "node"), public_id=public_id)
    try:
        run = services.fix_node(difference=difference, user=request.user)
    except services.DecisionError as error:
        messages.error(request, str(error))
        return _back(difference)
    messages.success(
        request,
        f"The inventory stays {difference.expected!r}; {run.deployment.name} puts {difference.node} right "
        f"(step {difference.node_fix_step}, approved by you).",
    )
    return redirect("deployment-detail", run.deployment.public_id)


@require_POST
@role_required(Role.OPERATOR)
def dismiss(request, public_id):
    difference = get_object_or_404(Difference.objects.select_related("job", "node"), public_id=public_id)
    try:
        services.dismiss_difference(difference=difference, user=request.user)
        messages.success(request, f"Dismissed: {difference}. The inventory is unchanged.")
    except services.DecisionError as error:
        messages.error(request, str(error))
    return _back(difference)


@require_POST
@role_required(Role.OPERATOR)
def accept_node(request, public_id, hostname):
    job = get_object_or_404(Job, public_id=public_id, kind=services.KIND)
    node = get_object_or_404(Node, hostname=hostname)
    accepted, problems = services.accept_all(job=job, node=node, user=request.user)
    messages.success(request, f"Accepted {accepted} difference(s) on {node}.")
    for problem in problems:
        messages.error(request, problem)
    return _back(job)
