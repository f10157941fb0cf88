"""Inventory pages: dashboard, nodes, racks, import/export, audit log. Thin: services do the work."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.views.generic import ListView
from django_filters.views import FilterView

from apps.accounts.choices import Role
from apps.accounts.decorators import role_required
from apps.accounts.permissions import may_decide_host_keys
from apps.core.models import AuditEntry
from apps.inventory import dashboard as panels
from apps.inventory import services, transfer
from apps.inventory.filters import NodeFilterSet
from apps.inventory.forms import TRANSFER_FORMATS, ImportForm, NodeForm
from apps.inventory.models import Node, Rack, SshHostKey


@login_required
def dashboard(request):
    return render(
        request,
        "inventory/dashboard.html",
        {
            "nodes_by_status": services.nodes_by_status(),
            "gpus_by_health": services.gpus_by_health(),
            "unhealthy_gpus": services.unhealthy_gpus(),
            "nodes_missing_gpus": services.compute_nodes_missing_gpus(),
            "racks": list(services.racks_with_power()),
            "panels": panels.render_panels(request),
        },
    )


class NodeListView(LoginRequiredMixin, FilterView):
    filterset_class = NodeFilterSet
    template_name = "inventory/node_list.html"
    paginate_by = 50
    # strict (django-filter's default): a filter that is not valid (a rack that does not exist) shows its error
    # and no rows, never every node as if nothing had been asked.

    def get_queryset(self):
        return Node.objects.with_counts().select_related("rack", "gpu_sku").prefetch_related("tags")

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        query = self.request.GET.copy()
        query.pop("page", None)
        context["query_without_page"] = query.urlencode()
        return context


@login_required
def node_detail(request, public_id):
    node = get_object_or_404(services.node_detail_queryset(), public_id=public_id)
    return render(
        request,
        "inventory/node_detail.html",
        {
            "node": node,
            "may_trust_keys": may_decide_host_keys(request.user),
            "audit": AuditEntry.objects.for_object(node).select_related("actor")[:20],
        },
    )


@role_required(Role.ADMIN)
def node_edit(request, public_id):
    node = get_object_or_404(Node, public_id=public_id)
    form = NodeForm(request.POST or None, instance=node)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, f"{node.hostname} saved.")
        return redirect("node-detail", public_id=node.public_id)
    return render(request, "inventory/node_form.html", {"node": node, "form": form})


@login_required
def trust_host_key(request, public_id, key_id):
    if not may_decide_host_keys(request.user):  # the same rule as PATCH /api/host-keys/
        raise PermissionDenied("Only an admin may trust a node's SSH host key.")
    key = get_object_or_404(SshHostKey.objects.select_related("node"), public_id=key_id, node__public_id=public_id)
    if request.method == "POST":
        services.trust_host_key(key=key, user=request.user)
        messages.success(request, f"Host key {key.fingerprint} of {key.node.hostname} is now trusted.")
    return redirect("node-detail", public_id=public_id)


@login_required
def rack_list(request):
    racks = Rack.objects.select_related("site").prefetch_related("nodes", "switches")
    elevations = [(rack, services.rack_elevation(rack)) for rack in racks]
    return render(request, "inventory/rack_list.html", {"elevations": elevations})


@login_required
def rack_detail(request, public_id):
    rack = get_object_or_404(Rack.objects.select_related("site"), public_id=public_id)
    nodes = rack.nodes.with_counts().order_by("-u_position")
    return render(
        request,
        "inventory/rack_detail.html",
        {"rack": rack, "elevation": services.rack_elevation(rack), "nodes": nodes},
    )


@login_required
def transfer_page(request):
    form = ImportForm()
    problems = []
    if request.method == "POST":
        if not request.user.has_role(Role.ADMIN):
            messages.error(request, "Importing needs the admin role.")
            return redirect("inventory-transfer")
        form = ImportForm(request.POST, request.FILES)
        if form.is_valid():
            upload = form.cleaned_data["file"]
            try:
                text = upload.read().decode("utf-8")
                result = transfer.import_inventory(text=text, fmt=form.cleaned_data["fmt"], user=request.user)
            except UnicodeDecodeError:
                form.add_error("file", "The file is not UTF-8 text.")
            except transfer.ImportRejected as rejected:
                problems = rejected.problems
                messages.error(request, f"Nothing was imported: {len(problems)} problem(s) in {upload.name}.")
            else:
                totals = result.totals
                messages.success(
                    request,
                    f"Imported {upload.name}: {totals.created} created, {totals.updated} updated, "
                    f"{totals.unchanged} unchanged.",
                )
                return redirect("inventory-transfer")
    return render(request, "inventory/transfer.html", {"form": form, "problems": problems, "formats": TRANSFER_FORMATS})


class AuditLogView(LoginRequiredMixin, ListView):
    template_name = "inventory/audit_log.html"
    paginate_by = 50

    def get_queryset(self):
        entries = AuditEntry.objects.select_related("actor")
        for param in ("object_type", "source", "action"):
            if value := self.request.GET.get(param):
                entries = entries.filter(**{param: value})
        if actor := self.request.GET.get("actor"):
            entries = entries.filter(actor_name=actor)
        return entries

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        query = self.request.GET.copy()
        query.pop("page", None)
        context["query_without_page"] = query.urlencode()
        context["object_types"] = AuditEntry.objects.order_by().values_list("object_type", flat=True).distinct()
        return context
