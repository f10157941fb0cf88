"""Discovery pages: recent discovery jobs (and a button to start one), and one job's results per node."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST
from rest_framework import serializers

from apps.accounts.choices import Role
from apps.accounts.decorators import role_required
from apps.core.forms import add_service_errors
from apps.core.listing import Listing
from apps.core.text import counted
from apps.discovery import services
from apps.discovery.choices import DifferenceState
from apps.discovery.filters import DISCOVERY_RUN_COLUMNS, DiscoveryRunFilterSet
from apps.discovery.forms import DiscoverForm
from apps.discovery.kinds import Discover
from apps.discovery.models import Difference, NodeFacts
from apps.inventory.models import Node
from apps.jobs.models import Job
from apps.nodeexec.transports import default_transport


def _list_page(request, form: DiscoverForm, status: int = 200):
    runs = services.discovery_jobs()
    shown = Listing.from_filters(
        request,
        DiscoveryRunFilterSet,
        runs,
        DISCOVERY_RUN_COLUMNS,
        auto_id="filter_%s",  # beside the start form
        default_sort="-started",
        per_page=25,
        filename="discovery-runs",
    )
    return shown.respond("discovery/job_list.html", {"form": form}, status=status)


@login_required
def job_list(request):
    form = DiscoverForm(initial={"scope": "all", "transport": default_transport(offered=Discover.transports)})
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
        add_service_errors(form, error.detail)
        return _list_page(request, form, status=400)
    messages.success(request, f"Discovery of {counted(job.node_count, 'node')} started.")
    return redirect("job-page", job.public_id)


RESULTS_PER_PAGE = 25


@login_required
def job_detail(request, public_id):
    """Nodes that need a look (open differences, facts that could not be read) first, 25 a page; nodes that match
    the inventory are counted, and listed only with ?show=all, so the page holds at 512 nodes."""
    job = get_object_or_404(Job.objects.select_related("requested_by"), public_id=public_id, kind=services.KIND)
    show_all = request.GET.get("show") == "all"
    open_counts = dict(
        Difference.objects.filter(job=job, state=DifferenceState.OPEN)
        .values("node_id")
        .annotate(open=Count("pk"))
        .values_list("node_id", "open")
    )
    could_not_run = {
        node_id
        for node_id, missing in NodeFacts.objects.filter(job=job).values_list("node_id", "could_not_run")
        if missing
    }
    reported = set(NodeFacts.objects.filter(job=job).values_list("node_id", flat=True))
    nodes = list(job.nodes.order_by("hostname").only("pk", "hostname", "public_id"))
    needs_look = {n.pk for n in nodes if open_counts.get(n.pk) or n.pk in could_not_run or n.pk not in reported}
    attention = [n for n in nodes if n.pk in needs_look]
    listed = (attention + [n for n in nodes if n.pk not in needs_look]) if show_all else attention
    page = Paginator(listed, RESULTS_PER_PAGE).get_page(request.GET.get("page"))
    on_page = [node.pk for node in page]
    snapshots = {
        facts.node_id: facts for facts in NodeFacts.objects.filter(job=job, node_id__in=on_page).defer("facts")
    }
    differences: dict[int, list[Difference]] = {}
    for difference in Difference.objects.filter(job=job, node_id__in=on_page).select_related("decided_by"):
        differences.setdefault(difference.node_id, []).append(difference)
    items = []
    for node in page:
        rows = differences.get(node.pk, [])
        items.append(
            {
                "node": node,
                "facts": snapshots.get(node.pk),
                "differences": [d for d in rows if d.state != DifferenceState.FILLED],
                "filled": [d for d in rows if d.state == DifferenceState.FILLED],
                "open": open_counts.get(node.pk, 0),
            }
        )
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "job": job,
        "nodes": items,
        "page_obj": page,
        "paginator": page.paginator,
        "is_paginated": page.paginator.num_pages > 1,
        "query_without_page": query.urlencode(),
        "show_all": show_all,
        "open_total": sum(open_counts.values()),
        "attention_count": len(attention),
        "matching_count": len(nodes) - len(attention),
    }
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
    messages.success(request, f"Accepted {counted(accepted, 'difference')} on {node}.")
    for problem in problems:
        messages.error(request, problem)
    return _back(job)
