"""Workload pages: lists and details of training jobs and inference services. Read only: changes go through the
API or the admin; a training job's progress is what the `training-progress` job kind stored."""

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render

from apps.workloads import charts, services
from apps.workloads.filters import InferenceServiceFilterSet, TrainingJobFilterSet


@login_required
def workload_list(request):
    jobs = TrainingJobFilterSet(request.GET, queryset=services.training_jobs())
    inference = InferenceServiceFilterSet(request.GET, queryset=services.inference_services())
    return render(
        request,
        "workloads/workload_list.html",
        {"training_jobs": jobs.qs, "inference_services": inference.qs},
    )


@login_required
def training_detail(request, public_id):
    job = get_object_or_404(services.training_jobs(), public_id=public_id)
    points = services.progress_series(job=job)
    context = {
        "job": job,
        "rank_map": job.rank_map(),
        "progress": points[-1] if points else None,
        "progress_figures": charts.progress_figures(points),
        "progress_interval": settings.RACKPILOT_TRAINING_PROGRESS_SECONDS,
    }
    return render(request, "workloads/training_detail.html", context)


@login_required
def service_detail(request, public_id):
    service = get_object_or_404(services.inference_services(), public_id=public_id)
    return render(request, "workloads/service_detail.html", {"service": service})
