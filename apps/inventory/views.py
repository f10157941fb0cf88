"""Inventory pages: dashboard, nodes, racks, PDUs, switches and cable traces, import/export, audit log. Thin views."""

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from apps.accounts.choices import Role
from apps.accounts.decorators import role_required
from apps.accounts.permissions import may_decide_host_keys
from apps.core import audit
from apps.core.filters import AuditEntryFilter
from apps.core.forms import form_problems
from apps.core.listing import SORT_PARAM, Column, Listing, SortRefused, csv_lines, sorted_rows
from apps.core.models import AuditEntry
from apps.core.text import counted
from apps.inventory import dashboard as panels
from apps.inventory import fabric, power, services, transfer
from apps.inventory.filters import (
    NODE_COLUMNS,
    PDU_COLUMNS,
    RACK_COLUMNS,
    SWITCH_COLUMNS,
    NodeFilterSet,
    PduFilterSet,
    RackFilterSet,
    SwitchFilterSet,
)
from apps.inventory.forms import TRANSFER_FORMATS, BulkNodeForm, DrainForm, ImportForm, NodeForm
from apps.inventory.models import Nic, Node, Pdu, Rack, SshHostKey, Switch
from apps.inventory.rackscale import rack_scale_summary
from apps.inventory.sections import NODE_PAGE, RACK_PAGE, SWITCH_PAGE
from apps.inventory.transfer.background import goes_to_background, start_background_import

DASHBOARD_RACKS = 12  # the most loaded; a fleet has hundreds, and the rack list has them all


@login_required
def dashboard(request):
    racks, rack_count = services.most_loaded_racks(DASHBOARD_RACKS)
    return render(
        request,
        "inventory/dashboard.html",
        {
            "nodes_by_status": services.nodes_by_status(),
            "gpus_by_health": services.gpus_by_health(),
            "unhealthy_gpus": services.unhealthy_gpus(),
            "nodes_missing_gpus": services.compute_nodes_missing_gpus(),
            "racks": racks,
            "rack_count": rack_count,
            "first_panels": panels.render_panels(request, first=True),
            "panels": panels.render_panels(request),
        },
    )


@login_required
def node_list(request):
    nodes = Node.objects.with_counts().select_related("rack", "gpu_sku").prefetch_related("tags")
    shown = Listing.from_filters(
        request,
        NodeFilterSet,
        nodes,
        NODE_COLUMNS,
        default_sort="hostname",
        per_page=50,
        filename="nodes",
    )
    extra = {"bulk_form": BulkNodeForm(), "may_drain": request.user.has_role(Role.OPERATOR)}
    return shown.respond("inventory/node_list.html", extra)


@login_required
def node_detail(request, public_id):
    node = get_object_or_404(services.node_detail_queryset(), public_id=public_id)
    return render(
        request,
        "inventory/node_detail.html",
        {
            "node": node,
            "may_trust_keys": may_decide_host_keys(request.user),
            "drain_form": DrainForm(),
            "audit": audit.attach_change_rows(list(AuditEntry.objects.for_object(node).select_related("actor")[:20])),
            "sections": NODE_PAGE.render(request, node),
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


@require_POST
@role_required(Role.OPERATOR)
def node_drain(request, public_id):
    node = get_object_or_404(Node, public_id=public_id)
    form = DrainForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            services.drain_nodes(nodes=[node], reason=data["reason"], since=data["since"], until=data["until"])
        except services.NodeChangeRefused as refused:
            messages.error(request, f"{node.hostname} was not drained: {refused}")
        else:
            messages.success(request, f"{node.hostname} drained: {node.drain_reason}")
    else:
        messages.error(request, f"{node.hostname} was not drained: {form_problems(form)}")
    return redirect("node-detail", public_id=node.public_id)


@require_POST
@role_required(Role.OPERATOR)
def node_undrain(request, public_id):
    node = get_object_or_404(Node, public_id=public_id)
    try:
        services.undrain_nodes(nodes=[node])
    except services.NodeChangeRefused as refused:
        messages.error(request, f"{node.hostname} was not undrained: {refused}")
    else:
        messages.success(request, f"{node.hostname} is back in service.")
    return redirect("node-detail", public_id=node.public_id)


@require_POST
@role_required(Role.OPERATOR)
def node_bulk(request):
    """The node list's actions on the ticked nodes; back to the same filtered page either way."""
    back = redirect(f"{reverse('node-list')}?{request.POST.get('query', '')}")
    form = BulkNodeForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Nothing changed: {form_problems(form)}")
        return back
    data, nodes = form.cleaned_data, list(form.cleaned_data["nodes"])
    if data["action"] == "edit" and not request.user.has_role(Role.ADMIN):
        messages.error(request, "Nothing changed: editing nodes needs the admin role.")
        return back
    try:
        if data["action"] == "drain":
            services.drain_nodes(nodes=nodes, reason=data["reason"], until=data["until"])
        elif data["action"] == "undrain":
            services.undrain_nodes(nodes=nodes)
        else:
            services.bulk_edit_nodes(
                nodes=nodes,
                status=data["status"],
                rack=data["rack"],
                add_tags=[data["add_tag"]] if data["add_tag"] else [],
                remove_tags=[data["remove_tag"]] if data["remove_tag"] else [],
            )
    except services.NodeChangeRefused as refused:
        messages.error(request, f"Nothing changed: {refused}")
        return back
    messages.success(request, f"{data['action'].capitalize()}: {counted(len(nodes), 'node')} done.")
    return back


@login_required
def trust_host_key(request, public_id, key_id):
    if not may_decide_host_keys(request.user):  # the same rule as PATCH /api/host-keys/
        raise PermissionDenied("Only an admin may trust a node's SSH host key.")
    key = get_object_or_404(SshHostKey.objects.select_related("node"), public_id=key_id, node__public_id=public_id)
    if request.method == "POST":
        services.trust_host_key(key=key, user=request.user)
        messages.success(request, f"Host key {key.fingerprint} of {key.node.hostname} is now trusted.")
    return redirect("node-detail", public_id=public_id)


def _racks(request) -> Listing:
    """The racks as the list and the elevations page show them: the same filters, sort and pages."""
    racks = power.with_measured(power.with_power(Rack.objects.select_related("site")))
    return Listing.from_filters(
        request, RackFilterSet, racks, RACK_COLUMNS, default_sort="name", per_page=50, filename="racks"
    )


@login_required
def rack_list(request):
    def with_power(context: dict) -> dict:
        return {
            "object_list": power.attach_power(context["object_list"]),
            "platform_w": power.PLATFORM_W,
            "tray_platform_w": power.TRAY_PLATFORM_W,
            "switch_tray_w": power.SWITCH_TRAY_W,
        }

    # The export reads the measured draw a chunk of racks at a time.
    return _racks(request).respond("inventory/rack_list.html", with_power, prepare=power.attach_power)


@login_required
def rack_elevations(request):
    """The front and rear elevations of a page of racks. The racks list loads its own page's from here when they are
    scrolled to (htmx asks for the drawings alone)."""
    drawings = "inventory/partials/rack_elevations.html" if request.headers.get("HX-Request") else ""
    return _racks(request).respond(
        drawings or "inventory/rack_elevations.html",
        lambda context: {"elevations": list(services.rack_elevations(list(context["object_list"])).values())},
    )


@login_required
def rack_detail(request, public_id):
    rack = get_object_or_404(power.with_power_parts(Rack.objects.select_related("site")), public_id=public_id)
    power.attach_power([rack])
    nodes = rack.nodes.with_counts().order_by("-u_position")
    return render(
        request,
        "inventory/rack_detail.html",
        {
            "rack": rack,
            "elevation": services.rack_elevation(rack),
            "nodes": nodes,
            "switches": rack.switches.order_by("-position", "name"),
            "pdus": rack.pdus.order_by("feed", "name"),
            "platform_w": power.PLATFORM_W,
            "tray_platform_w": power.TRAY_PLATFORM_W,
            "switch_tray_w": power.SWITCH_TRAY_W,
            "rack_scale": rack_scale_summary(rack),
            "sections": RACK_PAGE.render(request, rack),
        },
    )


@login_required
def pdu_list(request):
    shown = Listing.from_filters(
        request,
        PduFilterSet,
        Pdu.objects.select_related("rack__site"),
        PDU_COLUMNS,
        default_sort="name",
        per_page=100,
        filename="pdus",
    )
    return shown.respond("inventory/pdu_list.html")


@login_required
def pdu_detail(request, public_id):
    pdu = get_object_or_404(Pdu.objects.select_related("rack__site"), public_id=public_id)
    return render(request, "inventory/pdu_detail.html", {"pdu": pdu})


@login_required
def switch_list(request):
    switches = Switch.objects.select_related("site", "rack").annotate(
        cabled=Count("cables_as_a", distinct=True) + Count("cables_as_b", distinct=True)
    )
    shown = Listing.from_filters(
        request,
        SwitchFilterSet,
        switches,
        SWITCH_COLUMNS,
        default_sort="name",
        per_page=100,
        filename="switches",
    )
    return shown.respond("inventory/switch_list.html")


@login_required
def switch_detail(request, public_id):
    switch = get_object_or_404(Switch.objects.select_related("site", "rack"), public_id=public_id)
    return render(
        request,
        "inventory/switch_detail.html",
        {"switch": switch, "ports": fabric.switch_ports(switch), "sections": SWITCH_PAGE.render(request, switch)},
    )


@login_required
def nic_trace(request, public_id, nic_name):
    nic = get_object_or_404(Nic.objects.select_related("node"), node__public_id=public_id, name=nic_name)
    return render(request, "inventory/nic_trace.html", {"trace": fabric.trace_nic(nic), "node": nic.node})


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
                if goes_to_background(upload.size):
                    queued = start_background_import(
                        text=text, fmt=form.cleaned_data["fmt"], name=upload.name, user=request.user
                    )
                    messages.info(request, f"Importing {upload.name} in the background: its progress is below.")
                    return redirect(queued.page_path)
                result = transfer.import_inventory(text=text, fmt=form.cleaned_data["fmt"], user=request.user)
            except UnicodeDecodeError:
                form.add_error("file", "The file is not UTF-8 text.")
            except transfer.ImportRejected as rejected:
                problems = rejected.problems
                messages.error(request, f"Nothing was imported: {counted(len(problems), 'problem')} in {upload.name}.")
            else:
                totals = result.totals
                messages.success(
                    request,
                    f"Imported {upload.name}: {totals.created} created, {totals.updated} updated, "
                    f"{totals.unchanged} unchanged.",
                )
                return redirect("inventory-transfer")
    return render(request, "inventory/transfer.html", {"form": form, "problems": problems, "formats": TRANSFER_FORMATS})


# The audit log page's columns; its exports (below) write every field, in the order the page is sorted by.
AUDIT_LIST_COLUMNS = (
    Column("when", "When", lambda entry: entry.created.isoformat(), order="created"),
    Column("who", "Who", lambda entry: entry.actor_name or "system", order="actor_name"),
    Column("through", "Through", lambda entry: entry.get_source_display(), order="source"),
    Column("action", "Action", lambda entry: entry.get_action_display(), order="action"),
    Column("object", "Object", lambda entry: entry.object_repr, order="object_repr"),
    Column("changes", "Changes", lambda entry: json.dumps(entry.changes), order=None),
)


@login_required
def audit_log(request):
    """Every change and action, filtered; a bad filter shows its error and no rows (never the unfiltered log)."""
    entries = AuditEntry.objects.select_related("actor")
    shown = Listing.from_filters(
        request,
        AuditEntryFilter,
        entries,
        AUDIT_LIST_COLUMNS,
        default_sort="-when",
        per_page=50,
        filename="audit-log",
    )
    context = shown.context()
    audit.attach_change_rows(context["object_list"])
    context |= {
        "object_types": sorted(
            (
                (value, audit.type_label(value))
                for value in AuditEntry.objects.order_by().values_list("object_type", flat=True).distinct()
            ),
            key=lambda pair: pair[1].lower(),
        ),
    }
    return render(request, "inventory/audit_log.html", context, status=shown.status)


AUDIT_EXPORT_LIMIT = 100_000
AUDIT_COLUMNS = ["when", "who", "through", "action", "object_type", "object_id", "object", "job", "changes"]


@login_required
def audit_export(request, fmt):
    """The filtered log as CSV or JSON (sorted as the page is, newest first unless asked otherwise; at most
    AUDIT_EXPORT_LIMIT entries), streamed."""
    entries = AuditEntryFilter(request.GET, queryset=AuditEntry.objects.all())
    if not entries.is_valid():
        return JsonResponse({"errors": entries.errors.get_json_data()}, status=400)
    try:
        ordered = sorted_rows(entries.qs, AUDIT_LIST_COLUMNS, request.GET.get(SORT_PARAM) or "-when")
    except SortRefused as refused:
        return JsonResponse({"errors": {SORT_PARAM: [{"message": str(refused)}]}}, status=400)
    rows = _export_rows(ordered[:AUDIT_EXPORT_LIMIT].iterator(chunk_size=2000))
    if fmt == "json":
        body = _json_lines(rows)
    else:
        cells = ([json.dumps(row[c]) if c == "changes" else row[c] for c in AUDIT_COLUMNS] for row in rows)
        body = csv_lines(AUDIT_COLUMNS, cells)
    response = StreamingHttpResponse(body, content_type="application/json" if fmt == "json" else "text/csv")
    response["Content-Disposition"] = f'attachment; filename="audit-log.{fmt}"'
    return response


def _export_rows(entries, chunk: int = 2000):
    """The entries as export rows, their changes in words: a query per related model a chunk, as the page does."""
    batch = []
    for entry in entries:
        batch.append(entry)
        if len(batch) == chunk:
            yield from map(_export_row, audit.attach_change_rows(batch))
            batch = []
    yield from map(_export_row, audit.attach_change_rows(batch))


def _export_row(entry: AuditEntry) -> dict:
    return {
        "when": entry.created.isoformat(),
        "who": entry.actor_name or "system",
        "through": entry.get_source_display(),
        "action": entry.get_action_display(),
        "object_type": entry.object_type_label,
        "object_id": entry.object_id,
        "object": entry.object_repr,
        "job": str(entry.job) if entry.job else "",
        "changes": audit.changes_in_words(entry),
    }


def _json_lines(rows):
    yield "["
    for number, row in enumerate(rows):
        yield ("," if number else "") + "\n" + json.dumps(row)
    yield "\n]\n"
