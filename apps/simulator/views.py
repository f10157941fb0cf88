"""The simulator page: the faults injected into simulated nodes, a form to inject one, buttons to clear them; the
changes commands made on nodes, with a button to forget them."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST
from rest_framework import serializers

from apps.accounts.choices import Role
from apps.accounts.decorators import role_required
from apps.core.api import errors_beyond_shape
from apps.inventory.models import Node
from apps.simulator import services
from apps.simulator.faults.kinds import FAULT_KINDS
from apps.simulator.filters import SimFaultFilterSet
from apps.simulator.forms import FaultForm, simulated_nodes
from apps.simulator.models import SimChange, SimFault
from apps.simulator.training_faults import JOB_FAULTS, repaired_at


def _page(request, form: FaultForm, status: int = 200):
    faults = SimFault.objects.select_related("node", "created_by").order_by("node__hostname", "kind", "target")
    filterset = SimFaultFilterSet(request.GET, queryset=faults)
    kinds = [(spec.value, spec.label, spec.target.label) for spec in FAULT_KINDS.values()]
    changes = SimChange.objects.select_related("node").order_by("node__hostname", "key")
    shown = list(filterset.qs)
    for fault in shown:  # a fault a command undid is still injected, but the node no longer shows it: say so
        fault.repaired_at = repaired_at(fault)
    context = {"faults": shown, "filter": filterset, "form": form, "kinds": kinds, "changes": changes}
    context["node_hostnames"] = simulated_nodes().values_list("hostname", flat=True)  # the form's datalist
    context["rehearsable"] = JOB_FAULTS  # the faults that fail or slow a training job: a runbook can be rehearsed
    return render(request, "simulator/faults.html", context, status=status)


@login_required
def fault_list(request):
    return _page(request, FaultForm())


@require_POST
@role_required(Role.OPERATOR)
def fault_inject(request):
    form = FaultForm(request.POST)
    if not form.is_valid():
        form.add_fault_errors(errors_beyond_shape(form.errors, form.cleaned_data, _fault_errors))
        return _page(request, form, status=400)
    data = form.cleaned_data
    try:
        fault = services.inject_fault(
            node=data["node"],
            kind=data["kind"],
            target=data["target"],
            parameters=data["parameters"],
            user=request.user,
        )
    except serializers.ValidationError as error:
        form.add_fault_errors(error.detail)
        return _page(request, form, status=400)
    messages.success(request, f"{fault.summary} injected.")
    return redirect("simulator")


def _fault_errors(data: dict, refused: set[str]) -> dict:
    """What the fault's own checks say of the form's fields that passed (a target, parameters out of range)."""
    return services.fault_errors(
        node=data.get("node"), kind=data.get("kind"), target=data.get("target"), parameters=data.get("parameters")
    )


@require_POST
@role_required(Role.OPERATOR)
def fault_clear(request, public_id):
    fault = get_object_or_404(SimFault.objects.select_related("node"), public_id=public_id)
    services.clear_fault(fault=fault)
    messages.success(request, f"{fault.summary} cleared.")
    return redirect("simulator")


@require_POST
@role_required(Role.OPERATOR)
def node_clear(request, hostname):
    node = get_object_or_404(Node, hostname=hostname)
    removed = services.clear_all(node)
    messages.success(request, f"Cleared {removed} fault{'s' if removed != 1 else ''} on {node}.")
    return redirect("simulator")


@require_POST
@role_required(Role.OPERATOR)
def node_forget(request, hostname):
    node = get_object_or_404(Node, hostname=hostname)
    removed = services.clear_changes(node=node)
    messages.success(request, f"Forgot {removed} change{'s' if removed != 1 else ''} on {node}.")
    return redirect("simulator")
