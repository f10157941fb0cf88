"""Benchmark pages: suites, recent runs and the start form; a run's page (live while it runs: the results fragment
reloads every 2 s over htmx, each round's job page streams its output) with its figures, suspects and tests."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Prefetch
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST
from rest_framework import serializers

from apps.accounts.choices import Role
from apps.accounts.decorators import role_required
from apps.benchmarks import charts, services, timeline_jobs, timelines
from apps.benchmarks.choices import (
    ACTIVE,
    CASE_STUDY_COMMUNICATION_PCT,
    NCCL_SUITES,
    NODE_SUITES,
    TIMELINE_MAX_FILE_BYTES,
    TIMELINE_MAX_TRACE_BYTES,
    BurnLoad,
    Suite,
)
from apps.benchmarks.filters import BENCHMARK_RUN_COLUMNS, BenchmarkRunFilterSet
from apps.benchmarks.forms import BenchmarkForm, TimelineCompareForm
from apps.benchmarks.kinds import NcclTests
from apps.benchmarks.models import (
    Baseline,
    BenchmarkRun,
    BenchmarkTest,
    Measurement,
    MeasurementReference,
    Reference,
    Round,
    Suspect,
    TimelineAnalysis,
)
from apps.core.forms import add_service_errors, flat_messages
from apps.core.listing import Listing
from apps.core.text import counted
from apps.jobs.choices import JOB_ACTIVE
from apps.jobs.events import progress_of
from apps.jobs.models import Job
from apps.nodeexec.transports import default_transport
from apps.workloads.models import TrainingJob


def _list_page(request, form: BenchmarkForm, status: int = 200):
    runs = BenchmarkRun.objects.visible_to(request.user).select_related("requested_by")
    shown = Listing.from_filters(  # the same filters as GET /api/benchmarks/
        request,
        BenchmarkRunFilterSet,
        runs,
        BENCHMARK_RUN_COLUMNS,
        auto_id="filter_%s",  # the start form above has fields of the same names
        default_sort="-started",
        per_page=25,
        filename="benchmark-runs",
    )
    extra = {
        "form": form,
        "suites": Suite.choices,
        "nccl_suites": " ".join(sorted(NCCL_SUITES)),  # the start form shows sizes and collective for these
        "references": Reference.objects.all(),
        "measurement_references": MeasurementReference.objects.all(),
    }
    return shown.respond("benchmarks/benchmark_list.html", extra, status=status)


@login_required
def benchmark_list(request):
    transport = default_transport(offered=NcclTests.transports)
    return _list_page(request, BenchmarkForm(initial={"transport": transport}))


@require_POST
@role_required(Role.OPERATOR)
def start(request):
    form = BenchmarkForm(request.POST)
    if not form.is_valid():
        return _list_page(request, form, status=400)
    data = form.cleaned_data
    try:
        run = services.start_run(
            suite=data["suite"],
            targets=form.targets(),
            collective=data["collective"],
            min_bytes=data["min_bytes"],
            max_bytes=data["max_bytes"],
            iterations=data["iterations"],
            transport=data["transport"],
            cooldown_seconds=data["cooldown_seconds"],
            duration_seconds=data["duration_seconds"],
            hpl_n=data["hpl_n"],
            burn_load=data["burn_load"] or BurnLoad.GPU_BURN,
            requested_by=request.user,
        )
    except serializers.ValidationError as error:
        add_service_errors(form, error.detail)
        return _list_page(request, form, status=400)
    messages.success(request, f"{run.get_suite_display()} on {counted(run.nodes.count(), 'node')} started.")
    return redirect("benchmark-run", run.public_id)


def _round_labels(run) -> dict[str, dict[str, str]]:
    """For the live plot: each round job's tests by the node that launches them, named as the stored results name
    them ("gpu001 +7"): a launcher's rows are the whole set's, not that node's."""
    return {
        str(round_.job.public_id): {
            test["hosts"][0]: charts.hosts_label(test["hosts"])
            for test in round_.job.parameters.get("tests") or []
            if test.get("hosts")
        }
        for round_ in run.rounds.all()
        if round_.job is not None
    }


def _run_context(request, public_id) -> dict:
    run = get_object_or_404(
        BenchmarkRun.objects.visible_to(request.user)
        .select_related("requested_by", "accepted_by", "canceled_by")
        .prefetch_related(
            Prefetch("rounds", queryset=Round.objects.select_related("job")),
            Prefetch("suspects", queryset=Suspect.objects.select_related("node")),
        ),
        public_id=public_id,
    )
    if run.suite in NODE_SUITES:
        return _node_suite_context(request, run)
    tests = list(BenchmarkTest.objects.filter(run=run).select_related("round", "job", "reference"))
    hosts = list(run.nodes.order_by("hostname").values_list("hostname", flat=True))
    reference = next((test.reference for test in tests if test.reference), None)
    baseline = Baseline.objects.filter(collective=run.collective, hosts_key=",".join(hosts)).first() if hosts else None
    shown = tests[: charts.MAX_LINES]  # every test of the run, each its line (a sweep's halves too), up to the cap
    context = {
        "run": run,
        "tests": tests,
        "active": run.status in ACTIVE,
        "round_jobs": [round_.job.public_id for round_ in run.rounds.all() if round_.job is not None],
        "round_labels": _round_labels(run),
        "busbw_figure": charts.figure_json(
            charts.busbw_figure(
                shown, reference=reference, baseline_gb_per_s=baseline.busbw_gb_per_s if baseline else None
            )
        )
        if tests
        else None,
        "busbw_drawn": len(shown),
    }
    if run.suite in (Suite.SWEEP, Suite.PAIRWISE) and tests:
        context["heatmap"] = charts.sweep_heatmap(
            hosts,
            tests,
            list(run.suspects.all()),
            node_url=lambda node: reverse("node-detail", args=[node.public_id]),
        )
    return context


# The figure each per-node suite charts per node, and the one whose series is drawn for a chosen node.
BAR_CASES = {
    Suite.HPL_MXP: "lu_gflops_per_gpu",
    Suite.HPL: "hpl_gflops_per_gpu",
    Suite.NVBANDWIDTH: "device_to_device_memcpy_read_ce",
    Suite.BURN_IN: "sustained_sm_clock_mhz",
}
# Each bar chart's title in words.
BAR_TITLES = {
    Suite.HPL_MXP: "HPL-MxP LU throughput per GPU, each node alone",
    Suite.HPL: "HPL throughput per GPU, each node alone",
    Suite.NVBANDWIDTH: "device-to-device copy bandwidth (read, copy engine), each node",
    Suite.BURN_IN: "sustained SM clock under load, each node",
}
MATRIX_CASES = (
    "device_to_device_memcpy_read_ce",
    "device_to_device_memcpy_write_ce",
    "device_to_device_bidirectional_memcpy_read_ce",
)


def _node_suite_context(request, run: BenchmarkRun) -> dict:
    """HPL-MxP, nvbandwidth and burn-in: every figure, a bar per node, and for one node (?node=, else the worst)
    its nvbandwidth matrices or its soak's clocks and temperatures."""
    measurements = list(Measurement.objects.filter(run=run).select_related("round", "job", "reference"))
    figures = [item for item in measurements if item.case == BAR_CASES[run.suite]]
    # Nodes alone, against the per-node reference the chart draws; a run across nodes is judged against its own
    # multi-node model (its tiers are its own), so it is in the table, not under lines that are not its.
    bars = [item for item in figures if len(item.hosts) == 1]
    context = {"run": run, "measurements": measurements, "active": run.status in ACTIVE, "node_suite": True}
    context["across_nodes"] = len(figures) - len(bars)
    if bars:
        reference = next((item.reference for item in bars if item.reference), None)
        figure = charts.per_node_bar_figure(bars, reference=reference, title=BAR_TITLES[run.suite])
        context["bar_figure"] = charts.figure_json(figure)
    alone = [item for item in bars if len(item.hosts) == 1 and item.value is not None]
    chosen = request.GET.get("node") or (min(alone, key=lambda item: item.value).launcher if alone else "")
    context["chosen_node"] = chosen
    # The node selector picks whose matrices or soak are drawn: HPL draws neither, so it has none (it did nothing).
    per_node_charts = run.suite in (Suite.NVBANDWIDTH, Suite.BURN_IN)
    context["chart_nodes"] = sorted({item.launcher for item in alone}) if per_node_charts else []
    mine = [item for item in measurements if item.launcher == chosen and len(item.hosts) == 1]
    if run.suite == Suite.NVBANDWIDTH:
        context["matrices"] = [
            {"id": f"matrix-{position}", "case": item.case, "figure": charts.figure_json(charts.matrix_heatmap(item))}
            for position, item in enumerate(
                item for item in mine if item.case in MATRIX_CASES and item.series.get("matrix")
            )
        ]
    if run.suite == Suite.BURN_IN:
        soak = next((item for item in mine if item.case == "sustained_sm_clock_mhz" and item.series.get("gpus")), None)
        context["soak_figure"] = charts.figure_json(charts.soak_figure(soak)) if soak else None
    return context


@login_required
def run_detail(request, public_id):
    context = _run_context(request, public_id)
    if context["active"] and not context.get("node_suite"):  # the rows plotted as they arrive (benchmark_live.js)
        context["live_figure"] = charts.figure_json(charts.live_busbw_figure())
    return render(request, "benchmarks/run_detail.html", context)


@login_required
def run_live(request, public_id):
    """The results fragment the run page reloads while the run is active (a read: it writes nothing). Once the run
    has ended, the fragment (the final figures, "Accept as baseline") is answered with htmx's 286, which stops the
    polling: the page shows the end without reloading."""
    context = _run_context(request, public_id)
    return render(
        request, "benchmarks/partials/run_results.html", context, status=200 if context["active"] else STOP_POLLING
    )


STOP_POLLING = 286  # htmx swaps the answer and polls no more


@require_POST
@role_required(Role.OPERATOR)
def accept(request, public_id):
    run = get_object_or_404(BenchmarkRun, public_id=public_id)
    try:
        accepted = services.accept_baseline(run=run, user=request.user)
    except serializers.ValidationError as error:
        messages.error(request, "; ".join(flat_messages(error.detail)))
    else:
        messages.success(request, f"Baselines of their scopes set from {counted(accepted, 'figure')}.")
    return redirect("benchmark-run", run.public_id)


@require_POST
@role_required(Role.OPERATOR)
def cancel(request, public_id):
    run = get_object_or_404(BenchmarkRun.objects.visible_to(request.user), public_id=public_id)
    try:
        services.cancel_run(run=run, user=request.user)
    except services.RunFinished as error:
        messages.error(request, str(error))
    else:
        messages.success(request, "Cancel requested: no further round starts; what was measured is kept.")
    return redirect("benchmark-run", run.public_id)


# --- timeline analysis ------------------------------------------------------------------------------------------


def _timeline_list(request, *, errors: list[str] | None = None, status: int = 200):
    analyses = Paginator(
        TimelineAnalysis.objects.visible_to(request.user).select_related("training_job", "requested_by").recent(), 25
    ).get_page(request.GET.get("page"))
    context = {
        "page": analyses,
        "errors": errors or [],
        "training_jobs": TrainingJob.objects.order_by("name"),
        "case_study": CASE_STUDY_COMMUNICATION_PCT,
        "max_file_mib": TIMELINE_MAX_FILE_BYTES // 2**20,
        "max_trace_mib": TIMELINE_MAX_TRACE_BYTES // 2**20,
    }
    return render(request, "benchmarks/timeline_list.html", context, status=status)


@login_required
def timeline_list(request):
    return _timeline_list(request)


@require_POST
@role_required(Role.OPERATOR)
def timeline_upload(request):
    uploads = [(upload.name, upload) for upload in request.FILES.getlist("files")]
    name = request.POST.get("name", "")[:200]
    try:
        if timeline_jobs.is_large(uploads):  # a worker analyses it; its progress page ends on the analysis
            job = timeline_jobs.start_analysis(files=uploads, name=name, requested_by=request.user)
            messages.success(request, "Large traces: a worker analyses them.")
            return redirect("benchmark-timeline-job", job.public_id)
        analysis = timelines.analyse_upload(files=uploads, name=name, requested_by=request.user)
    except serializers.ValidationError as error:
        return _timeline_list(request, errors=flat_messages(error.detail), status=400)
    messages.success(
        request, f"{counted(analysis.rank_count, 'rank')}, {counted(analysis.step_count, 'step')} analysed."
    )
    return redirect("benchmark-timeline", analysis.public_id)


@require_POST
@role_required(Role.OPERATOR)
def timeline_from_job(request):
    job = TrainingJob.objects.filter(name=request.POST.get("training_job", "")).first()
    steps = request.POST.get("steps", "")
    try:
        if job is None:
            raise serializers.ValidationError({"training_job": ["Choose a training job."]})
        if not steps.isdigit():
            raise serializers.ValidationError({"steps": ["A whole number of steps."]})
        started = timeline_jobs.start_profile(training_job=job, steps=int(steps), requested_by=request.user)
    except serializers.ValidationError as error:
        return _timeline_list(request, errors=flat_messages(error.detail), status=400)
    return redirect("benchmark-timeline-job", started.public_id)


def _timeline_job_context(request, public_id) -> dict:
    jobs = Job.objects.visible_to(request.user).select_related("requested_by")
    job = get_object_or_404(jobs, public_id=public_id, kind=timeline_jobs.KIND)
    return {
        "job": job,
        "analysis": timeline_jobs.analysis_of(job),
        "progress": progress_of(job.pk),
        "events": list(reversed(job.events.order_by("-seq")[:5])),
        "active": job.status in JOB_ACTIVE,
    }


@login_required
def timeline_job(request, public_id):
    """A profile's or large upload's progress: its bar and latest events, reloaded every 2 s over htmx; once the job
    has stored its analysis the page is the analysis (a reload or back goes straight there)."""
    context = _timeline_job_context(request, public_id)
    if context["analysis"] is not None:
        return redirect("benchmark-timeline", context["analysis"].public_id)
    return render(request, "benchmarks/timeline_job.html", context)


@login_required
def timeline_job_live(request, public_id):
    """The progress fragment (a read). Once the analysis is stored, htmx is sent to it (HX-Redirect); a job that
    ended without one answers 286, which stops the polling with the reason shown."""
    context = _timeline_job_context(request, public_id)
    if context["analysis"] is not None:
        response = HttpResponse()
        response["HX-Redirect"] = reverse("benchmark-timeline", args=[context["analysis"].public_id])
        return response
    status = 200 if context["active"] else STOP_POLLING
    return render(request, "benchmarks/partials/timeline_job_progress.html", context, status=status)


def _timeline_context(request, public_id, *, prefix: str = "") -> dict:
    analysis = get_object_or_404(
        TimelineAnalysis.objects.visible_to(request.user).select_related("training_job", "requested_by"),
        public_id=public_id,
    )
    ranks = analysis.series.get("ranks", [])
    chosen = request.GET.get("rank", "")
    rank = int(chosen) if chosen.isdigit() and any(item["rank"] == int(chosen) for item in ranks) else None
    return {
        "analysis": analysis,
        "report": timelines.report(analysis),
        "rank": rank,
        "prefix": prefix,
        "step_figure": charts.figure_json(charts.timeline_step_figure(analysis, rank=rank)),
        "rank_figure": charts.figure_json(charts.timeline_rank_figure(analysis)) if len(ranks) > 1 else None,
    }


@login_required
def timeline_detail(request, public_id):
    context = _timeline_context(request, public_id)
    context["others"] = (
        TimelineAnalysis.objects.visible_to(request.user).exclude(pk=context["analysis"].pk).recent()[:20]
    )
    context["case_study"] = CASE_STUDY_COMMUNICATION_PCT
    return render(request, "benchmarks/timeline_detail.html", context)


@login_required
def timeline_compare(request):
    """Two analyses side by side (?a=&b=, their public ids): shares, step bars, per-rank tables."""
    form = TimelineCompareForm(request.GET)
    if not form.is_valid():
        return render(request, "benchmarks/timeline_compare.html", {"form": form}, status=400)
    sides = [
        _timeline_context(request, form.cleaned_data["a"], prefix="a-"),
        _timeline_context(request, form.cleaned_data["b"], prefix="b-"),
    ]
    context = {"form": form, "sides": sides, "case_study": CASE_STUDY_COMMUNICATION_PCT}
    return render(request, "benchmarks/timeline_compare.html", context)
