"""Job pages: the list (live), a job (matrix, progress, live log, cancel), a new job, one cell's output."""

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST
from rest_framework import serializers

from apps.accounts.choices import Role
from apps.accounts.decorators import role_required
from apps.core.api import errors_beyond_shape
from apps.core.forms import add_service_errors
from apps.core.listing import Listing
from apps.core.text import counted
from apps.jobs import services
from apps.jobs.choices import FAILED_STEPS, JOB_STATUS_COLOURS, STEP_STATUS_COLOURS, JobStatus, StepStatus
from apps.jobs.events import event_dict, progress_of
from apps.jobs.filters import JOB_COLUMNS, STARTED_BY, JobFilterSet
from apps.jobs.forms import JobForm
from apps.jobs.kinds import KINDS, output_is_private
from apps.jobs.models import Job, JobEvent, JobStep

INITIAL_EVENTS = 500
MATRIX_PAGE_SIZE = 100  # nodes (rows) of the matrix per page


@login_required
def job_list(request):
    jobs = Job.objects.visible_to(request.user).with_progress().select_related("requested_by")
    shown = Listing.from_filters(  # the same filters as GET /api/jobs/
        request,
        JobFilterSet,
        jobs,
        JOB_COLUMNS,
        default_sort="-created",
        per_page=50,
        filename="jobs",
    )
    template = "jobs/partials/job_rows.html" if request.headers.get("HX-Request") else "jobs/job_list.html"
    return shown.respond(
        template,
        lambda context: {
            "page": context["page_obj"],
            "jobs": context["object_list"],
            "status": request.GET.get("status", ""),
            "kind": request.GET.get("kind", ""),
            "started_by": request.GET.get("started_by", ""),
            "started_by_choices": STARTED_BY,
            "statuses": JobStatus.choices,
            "kinds": sorted(KINDS),
            "colours": JOB_STATUS_COLOURS,
        },
    )


def matrix_window(job, params=None) -> dict:
    """The rows (nodes) of the job's matrix one page at a time: MATRIX_PAGE_SIZE nodes, narrowed by a hostname
    filter (`node`, a part of the name) and to the nodes with a failed cell (`only=failures`). The same few queries
    whatever the job's size: the page of hostnames (with its count), the failed nodes' count, every hostname (for
    the log's filter); the page's cells are read by live_context."""
    params = params if params is not None else {}
    node = (params.get("node") or "").strip()[:253]
    failures = params.get("only") == "failures"
    steps = JobStep.objects.filter(job=job)
    chosen = steps.filter(hostname__icontains=node) if node else steps
    if failures:
        chosen = chosen.filter(status__in=FAILED_STEPS)
    hostnames = chosen.order_by("hostname").values_list("hostname", flat=True).distinct()
    paginator = Paginator(hostnames, MATRIX_PAGE_SIZE)
    number = params.get("page")
    page = paginator.get_page(paginator.num_pages if number == "last" else number)
    shown = list(page.object_list)
    return {
        "page": page,
        "hostnames": shown,
        "node": node,
        "failures": failures,
        "filtered": bool(node or failures),
        "failed_nodes": steps.filter(status__in=FAILED_STEPS).values("hostname").distinct().count(),
        # Every node of the job, for the log's node filter (the log follows the whole job, not this page).
        "all_hostnames": list(steps.order_by("hostname").values_list("hostname", flat=True).distinct()),
    }


def live_context(job, params=None) -> dict:
    """What a page following a job needs for jobs.js: one page of the matrix (columns, rows of cells; see
    matrix_window), progress with the counts per status of the whole job, and the initial state with the latest
    events. The job page and the deployment's running view both use it."""
    window = matrix_window(job, params)
    cells = list(JobStep.objects.filter(job=job, hostname__in=window["hostnames"]).order_by("hostname", "position"))
    columns, rows, current = [], [], None
    for cell in cells:
        if (cell.step, cell.label) not in columns and (not rows or rows[0][0] == cell.hostname):
            columns.append((cell.step, cell.label))
        if current is None or current[0] != cell.hostname:
            current = (cell.hostname, [])
            rows.append(current)
        # In the failures-only view the other cells of a failed node are left blank: only failures show.
        cell.shown = not window["failures"] or cell.status in FAILED_STEPS
        current[1].append(cell)
    progress = progress_of(job.pk)
    recent = list(JobEvent.objects.filter(job=job).order_by("-seq")[:INITIAL_EVENTS])[::-1]
    return {
        "columns": columns,
        "rows": rows,
        "progress": progress,
        "matrix": window,
        "status_counts": status_counts(progress["counts"]),
        "initial": {
            "id": str(job.public_id),
            "status": job.status,
            "last_seq": recent[-1].seq if recent else 0,
            "first_seq": recent[0].seq if recent else 1,
            "events": [event_dict(e) for e in recent],
            "step_colours": STEP_STATUS_COLOURS,
            "job_colours": JOB_STATUS_COLOURS,
            "step_labels": dict(StepStatus.choices),
        },
    }


def status_counts(counts: dict) -> list[dict]:
    """Cells per status for the whole job, in the statuses' order, as the page shows them above the matrix."""
    return [
        {"status": status, "label": label, "colour": STEP_STATUS_COLOURS.get(status, "grey"), "count": counts[status]}
        for status, label in StepStatus.choices
        if counts.get(status)
    ]


@login_required
def job_detail(request, public_id):
    job = get_object_or_404(Job.objects.visible_to(request.user).select_related("requested_by"), public_id=public_id)
    return render(
        request,
        "jobs/job_detail.html",
        {
            "job": job,
            "colour": JOB_STATUS_COLOURS.get(job.status, "grey"),
            **live_context(job, request.GET),
            "parameters": json.dumps(job.parameters, indent=2, sort_keys=True),
            "may_cancel": request.user.has_role(Role.OPERATOR) and job.is_active,
        },
    )


@login_required
def job_cell(request, public_id, hostname, step):
    job = get_object_or_404(Job.objects.visible_to(request.user), public_id=public_id)
    cell = get_object_or_404(JobStep.objects.prefetch_related("artifacts"), job=job, hostname=hostname, step=step)
    events = JobEvent.objects.filter(job=job, hostname=hostname, step=step).order_by("seq")[:2000]
    # File content a user pointed at (a training log) is for operators (JobKind.private_output).
    hidden = output_is_private(job.kind) and not request.user.has_role(Role.OPERATOR)
    return render(
        request,
        "jobs/partials/cell.html",
        {"job": job, "cell": cell, "events": events, "artifacts": [] if hidden else cell.artifacts.all()},
    )


@role_required(Role.OPERATOR)
def job_new(request):
    form = JobForm(request.POST or None, initial={"nodes": request.GET.getlist("node")})
    if request.method == "POST" and not form.is_valid():
        add_service_errors(form, errors_beyond_shape(form.errors, form.cleaned_data, _request_errors))
    elif request.method == "POST":
        data = form.cleaned_data
        try:
            services.check_startable(kind=data["kind"])
            job = services.create_job(
                kind=data["kind"],
                targets=_targets(data),
                parameters=data["parameters"],
                transport=data["transport"],
                requested_by=request.user,
            )
        except serializers.ValidationError as error:
            add_service_errors(form, error.detail)
        else:
            messages.success(request, f"{job.kind} started on {counted(job.node_count, 'node')}.")
            return redirect("job-page", public_id=job.public_id)
    defaults = {name: _defaults(cls) for name, cls in KINDS.items()}
    return render(request, "jobs/job_new.html", {"form": form, "kinds": KINDS, "defaults": defaults})


def _request_errors(data: dict, refused: set[str]) -> dict:
    """What the job's own checks say of the form's fields that passed (the targets only when all three did)."""
    targets_known = not refused & {"nodes", "racks", "tags"} and any(data.get(k) for k in ("nodes", "racks", "tags"))
    return services.request_errors(
        kind=data.get("kind"),
        targets=_targets(data) if targets_known else None,
        parameters=data.get("parameters", {}),
        transport=data.get("transport") or None,
    )


def _targets(data: dict) -> services.TargetSpec:
    return services.TargetSpec(
        nodes=tuple(n.hostname for n in data["nodes"]),
        racks=tuple(r.name for r in data["racks"]),
        tags=tuple(t.slug for t in data["tags"]),
    )


def _defaults(kind_cls) -> dict:
    out = {}
    for name, field in kind_cls.parameters().fields.items():
        default = field.default
        if default is not serializers.empty:
            out[name] = default() if callable(default) else default
    return out


@require_POST
@role_required(Role.OPERATOR)
def job_cancel(request, public_id):
    job = get_object_or_404(Job, public_id=public_id)
    services.cancel_job(job=job, user=request.user)
    messages.info(request, "Cancel requested: no new command starts, running ones are stopped.")
    return redirect("job-page", public_id=job.public_id)
