"""Cost policy pages: the list with a form per kind, one policy with its actions and buttons, an action's files.
Thin: apps.costs.services does the work."""

import uuid

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from apps.accounts.choices import Role
from apps.accounts.decorators import role_required
from apps.costs import services as policies
from apps.costs.choices import PolicyKind
from apps.costs.forms import cost_policy_forms
from apps.costs.models import CostPolicy, PolicyAction
from apps.costs.policies import tiering
from apps.costs.policies.base import POLICY_KINDS, policy_kind


@login_required
def policy_list(request: HttpRequest) -> HttpResponse:
    """Every cost policy with its newest action; operators add one of any kind, each kind's form built from the
    parameters it declares."""
    operator = request.user.has_role(Role.OPERATOR)
    posted = request.POST.get("kind") if request.method == "POST" else None
    if request.method == "POST":
        if not operator:
            return HttpResponse("Only operators define cost policies.", status=403)
        if posted not in POLICY_KINDS:
            return HttpResponseBadRequest("kind: choose one of " + ", ".join(sorted(POLICY_KINDS)) + ".")
    forms = cost_policy_forms(request.POST, posted=posted) if operator else []
    form = next((form for form in forms if form.kind.name == posted), None)
    if form is not None and form.is_valid():
        data = form.cleaned_data
        policy = data["policy"]
        policy.name, policy.parameters, policy.created_by = data["name"], data["parameters"], request.user
        policy.save()
        messages.success(request, f"Policy {policy.name} saved. Run a dry run to see what it would do.")
        return redirect("policy-detail", public_id=policy.public_id)
    rows = list(CostPolicy.objects.select_related("rack", "service"))
    for row in rows:
        row.parameter_rows = policy_kind(row.kind).described(row.parameters)
    price = f"{settings.RACKPILOT_ENERGY_PRICE_PER_KWH:g} {settings.RACKPILOT_ENERGY_CURRENCY}/kWh"
    context = {"policies": rows, "forms": forms, "form": form, "price_note": price}
    return render(request, "costs/policies.html", context)


@login_required
def policy_detail(request: HttpRequest, public_id) -> HttpResponse:
    """One policy: its parameters, the dry-run button, and every action with its commands, saving and buttons."""
    policy = get_object_or_404(CostPolicy.objects.select_related("rack", "service"), public_id=public_id)
    actions = list(policy.actions.select_related("apply_job", "revert_job")[:20])
    kind = policy_kind(policy.kind)
    for action in actions:
        action.downloads = kind.artefacts(action)  # the files to apply beside the commands
        # a tiering plan is files: the page shows their count, bytes and top directories
        action.files = tiering.summary(action.plan) if policy.kind == PolicyKind.STORAGE_TIERING else None
    return render(
        request,
        "costs/policy.html",
        {
            "policy": policy,
            "parameters": kind.described(policy.parameters),
            "actions": actions,
            "can_operate": request.user.has_role(Role.OPERATOR),
            "can_trust": request.user.has_role(Role.ADMIN),
        },
    )


@login_required
def policy_artefact(request: HttpRequest, public_id, action_id, name: str) -> HttpResponse:
    """One of an action's files (a KEDA ScaledObject, an HPA, PriorityClasses...), validated, as a download."""
    action = get_object_or_404(
        PolicyAction.objects.select_related("policy"), policy__public_id=public_id, public_id=action_id
    )
    chosen = next((a for a in policy_kind(action.policy.kind).artefacts(action) if a.name == name), None)
    if chosen is None:
        raise Http404("No such artefact.")
    response = HttpResponse(chosen.content, content_type=chosen.media_type)
    response["Content-Disposition"] = f'attachment; filename="{chosen.filename}"'
    return response


POLICY_STEPS = ("dry-run", "survey", "approve", "apply", "revert", "discard", "standing-approval")


@role_required(Role.OPERATOR)
@require_POST
def policy_step(request: HttpRequest, public_id, step: str) -> HttpResponse:
    """The page's buttons: dry run, approve, apply, revert, discard; standing approval (admins)."""
    policy = get_object_or_404(CostPolicy, public_id=public_id)
    if step not in POLICY_STEPS:
        raise Http404("No such step.")
    action = None
    if step not in ("dry-run", "survey", "standing-approval"):
        try:
            wanted = uuid.UUID(request.POST.get("action", ""))
        except ValueError:
            raise Http404("No such action.") from None
        action = get_object_or_404(PolicyAction, policy=policy, public_id=wanted)
    try:
        if step == "dry-run":
            created = policies.dry_run(policy=policy, user=request.user)
            messages.success(request, f"Dry run: {created.reason}.")
        elif step == "survey":
            job = policies.survey(policy=policy, user=request.user)
            messages.success(request, f"Surveying: the proposal follows when job {job.public_id} ends.")
        elif step == "approve":
            policies.approve(action=action, user=request.user)
            messages.success(request, "Approved; apply it when ready.")
        elif step == "apply":
            policies.apply(action=action, user=request.user)
            messages.success(request, "Applying: follow the job.")
        elif step == "revert":
            policies.revert(action=action, user=request.user, reason=request.POST.get("reason", "")[:200])
            messages.success(request, "Reverting: the defaults go back on.")
        elif step == "discard":
            policies.discard(action=action, user=request.user)
            messages.success(request, "Proposal discarded.")
        else:
            standing = request.POST.get("standing") == "on"
            policies.set_standing_approval(policy=policy, user=request.user, standing=standing)
            messages.success(request, f"Standing approval {'given' if standing else 'taken back'}.")
    except policies.PolicyError as error:
        messages.error(request, str(error))
    return redirect("policy-detail", public_id=policy.public_id)
