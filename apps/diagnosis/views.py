"""Diagnosis pages: log triage (a POST there only reads), and incidents: list, open, follow live, approve a fix."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.db.models import Prefetch
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from apps.accounts.choices import Role
from apps.accounts.decorators import role_required
from apps.core.listing import Listing
from apps.diagnosis import rehearsal, services
from apps.diagnosis.choices import Problem, RemediationState
from apps.diagnosis.costs import incident_cost
from apps.diagnosis.filters import INCIDENT_COLUMNS, IncidentFilterSet
from apps.diagnosis.forms import IncidentForm, RehearsalForm, TriageForm
from apps.diagnosis.models import Evidence, Hypothesis, Incident
from apps.diagnosis.phases import Phase


@login_required
def triage(request):
    result = None
    status = 200
    if request.method == "POST":
        form = TriageForm(request.POST, request.FILES)
        if form.is_valid():
            result = services.triage_text(text=form.cleaned_data["log"], source=form.cleaned_data["source"])
            for finding in result.findings:  # (number, text) pairs for the excerpt
                finding["cited"] = list(zip(finding["lines"], finding["excerpt"], strict=True))
        else:
            status = 400
    else:
        form = TriageForm()
    context = {
        "form": form,
        "result": result,
        "limit": filesizeformat(services.max_bytes()),
        "problems": Problem.choices,
    }
    return render(request, "diagnosis/triage.html", context, status=status)


def _incident_list(request, form, *, status: int = 200):
    incidents = Incident.objects.select_related("training_job", "node", "recurrence_of")
    shown = Listing.from_filters(  # the same filters as GET /api/incidents/
        request,
        IncidentFilterSet,
        incidents,
        INCIDENT_COLUMNS,
        default_sort="-opened",
        per_page=50,
        filename="incidents",
    )
    return shown.respond("diagnosis/incident_list.html", {"form": form}, status=status)


@login_required
def incident_list(request):
    return _incident_list(request, IncidentForm() if request.user.has_role(Role.OPERATOR) else None)


@role_required(Role.OPERATOR)
@require_POST
def incident_open(request):
    form = IncidentForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            with transaction.atomic():  # a runbook that cannot start leaves no incident behind
                incident = services.open_incident(
                    user=request.user,
                    training_job=data["training_job"],
                    node=data["node"],
                    symptom=data["symptom"],
                    transport=data["transport"],
                    runbook=data.get("runbook") or "nccl-timeout",
                )
                services.start_runbook(incident=incident, user=request.user, sample_seconds=data.get("sample_seconds"))
        except services.IncidentError as error:
            for field, messages in error.errors.items():
                form.add_error(field if field in form.fields else None, messages)
        else:
            return redirect("incident-detail", public_id=incident.public_id)
    return _incident_list(request, form, status=400)


def _incident(public_id) -> Incident:
    queryset = Incident.objects.select_related("training_job", "node", "recurrence_of", "opened_by").prefetch_related(
        "suspect_nodes",
        Prefetch("evidence", queryset=Evidence.objects.select_related("job", "artifact__step__job").order_by("seq")),
        Prefetch(
            "hypotheses",
            queryset=Hypothesis.objects.prefetch_related("supporting", "contradicting").order_by("rank"),
        ),
        "ranking_changes",
        "remediations__approved_by",
        "jobs",
    )
    return get_object_or_404(queryset, public_id=public_id)


def _context(request, incident: Incident) -> dict:
    remediations = list(incident.remediations.all())
    jobs = sorted(incident.jobs.all(), key=lambda job: job.created)
    return {
        "incident": incident,
        "remediations": [(item, services.dry_run(remediation=item)) for item in remediations],
        "may_approve": request.user.has_role(Role.OPERATOR),
        "proposed": RemediationState.PROPOSED,
        "jobs": jobs,
        "sample_seconds": next(
            (job.parameters.get("sample_seconds") for job in jobs if job.parameters.get("phase") == Phase.SAMPLE), None
        ),
    }


@login_required
def incident_detail(request, public_id):
    incident = _incident(public_id)
    live = {
        "id": str(incident.public_id),
        "liveUrl": reverse("incident-live", args=[incident.public_id]),
        "active": incident.active,
    }
    cost = incident_cost(incident, now=timezone.now())  # not in the live part: the page's one read of it
    return render(
        request, "diagnosis/incident_detail.html", {**_context(request, incident), "live": live, "cost": cost}
    )


@login_required
def incident_live(request, public_id):
    """The part of the incident page that changes while the runbook runs: fetched again on each push of its socket,
    or every 2 s while it is active and the page has no socket (static/js/incidents.js)."""
    incident = _incident(public_id)
    return render(request, "diagnosis/partials/incident_live.html", _context(request, incident))


@role_required(Role.OPERATOR)
@require_POST
def incident_runbook(request, public_id):
    incident = get_object_or_404(Incident, public_id=public_id)
    try:
        services.start_runbook(incident=incident, user=request.user)
    except services.IncidentError as error:
        messages.error(request, error.message)
    return redirect("incident-detail", public_id=incident.public_id)


@role_required(Role.OPERATOR)
@require_POST
def remediation_approve(request, public_id, remediation_id):
    incident = get_object_or_404(Incident, public_id=public_id)
    remediation = incident.remediations.filter(public_id=remediation_id).first()
    if remediation is None:
        raise Http404("No such fix on this incident.")
    try:
        services.approve_remediation(remediation=remediation, user=request.user)
    except services.IncidentError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Approved: {remediation.summary}")
    return redirect("incident-detail", public_id=incident.public_id)


@role_required(Role.OPERATOR)
@require_POST
def incident_rehearse(request):
    """The simulator page's "Rehearse runbook": the fault's runbook on a training job it hurts, as a rehearsal."""
    form = RehearsalForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(error for errors in form.errors.values() for error in errors))
        return redirect("simulator")
    try:
        incident = rehearsal.rehearse(fault=form.cleaned_data["fault"], user=request.user)
    except services.IncidentError as error:
        messages.error(request, error.message)
        return redirect("simulator")
    return redirect("incident-detail", public_id=incident.public_id)
