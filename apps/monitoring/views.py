from django.contrib.auth.decorators import login_required
from django.http import HttpResponse


@login_required
def cluster_telemetry(request):
    return HttpResponse("")


@login_required
def node_telemetry(request, public_id):
    return HttpResponse("")
