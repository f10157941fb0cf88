"""Downloads for the scheduler: Slurm's topology.conf from the inventory, and the HealthCheckProgram script."""

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse

from apps.inventory.choices import Plane
from apps.schedulers.healthcheck import healthcheck_script
from apps.schedulers.topology_conf import topology_conf

DATA_PLANES = (Plane.A, Plane.B)


def _text(content: str, filename: str, status: int = 200) -> HttpResponse:
    response = HttpResponse(content, content_type="text/plain; charset=utf-8", status=status)
    if status == 200:
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
def topology_conf_download(request):
    plane = request.GET.get("plane", Plane.A)
    if plane not in DATA_PLANES:
        return _text(f"plane: one of {', '.join(DATA_PLANES)}, not {plane[:20]!r}.\n", "", status=400)
    return _text(topology_conf(plane=plane).text, "topology.conf")


@login_required
def healthcheck_download(request):
    return _text(healthcheck_script(), "rackpilot-healthcheck")
