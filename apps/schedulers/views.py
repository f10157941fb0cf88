"""Downloads for the scheduler: Slurm's topology.conf / topology.yaml from the inventory, an NVLink domain's
ComputeDomain for Kubernetes, and the HealthCheckProgram script."""

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import get_object_or_404

from apps.inventory.choices import Plane
from apps.inventory.models import NvlinkDomain
from apps.schedulers.compute_domain import dns_name, manifest_yaml
from apps.schedulers.healthcheck import healthcheck_script
from apps.schedulers.topology_conf import block_topology, topology_conf

DATA_PLANES = (Plane.A, Plane.B)
PLUGINS = ("tree", "block")  # Slurm's topology/tree (the fabric's switches) and topology/block (NVLink domains)


def _text(content: str, filename: str, status: int = 200) -> HttpResponse:
    response = HttpResponse(content, content_type="text/plain; charset=utf-8", status=status)
    if status == 200:
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _query(request) -> tuple[str, str, HttpResponse | None]:
    """The plane and plugin asked, or the 400 that names the one that is not known."""
    plane, plugin = request.GET.get("plane", Plane.A), request.GET.get("plugin", "tree")
    if plane not in DATA_PLANES:
        return plane, plugin, _text(f"plane: one of {', '.join(DATA_PLANES)}, not {plane[:20]!r}.\n", "", status=400)
    if plugin not in PLUGINS:
        return plane, plugin, _text(f"plugin: one of {', '.join(PLUGINS)}, not {plugin[:20]!r}.\n", "", status=400)
    return plane, plugin, None


@login_required
def topology_conf_download(request):
    """topology.conf for topology/tree (one plane's switches, the default) or topology/block (`plugin=block`)."""
    plane, plugin, refused = _query(request)
    if refused:
        return refused
    text = block_topology(plane=plane).text if plugin == "block" else topology_conf(plane=plane).text
    return _text(text, "topology.conf")


@login_required
def topology_yaml_download(request):
    """topology.yaml (Slurm 25.05+): the tree of one plane and the NVLink domains' blocks in one file."""
    plane, _, refused = _query(request)
    if refused:
        return refused
    return _text(block_topology(plane=plane).yaml, "topology.yaml")


@login_required
def healthcheck_download(request):
    return _text(healthcheck_script(), "rackpilot-healthcheck")


@login_required
def compute_domain_download(request, public_id):
    domain = get_object_or_404(NvlinkDomain.objects.select_related("rack"), public_id=public_id)
    return _text(manifest_yaml(domain), f"computedomain-{dns_name(domain.name)}.yaml")
