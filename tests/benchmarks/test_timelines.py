"""Timeline analysis: uploads (streamed, bounded), traces from a simulated training job, pages, API and CLI."""

import gzip
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework import serializers

from apps.benchmarks import timelines
from apps.benchmarks.models import TimelineAnalysis
from apps.core.models import AuditEntry
from apps.inventory.models import Node
from apps.parsers.timeline_steps import breakdown, read_trace
from apps.workloads.models import TrainingJob, TrainingJobNode
from tests.parsers.helpers import REAL

pytestmark = pytest.mark.usefixtures("on_the_simulator")

H200 = REAL / "h200-1gpu/torch-profiler-ddp-trace.json.gz"


def upload(name: str, content: bytes):
    return (name, io.BytesIO(content))


def refused(files) -> str:
    with pytest.raises(serializers.ValidationError) as caught:
        timelines.analyse_upload(files=files)
    assert set(caught.value.detail) == {"files"}
    assert not TimelineAnalysis.objects.exists()  # nothing stored
    return str(caught.value.detail["files"][0])


def test_the_real_trace_gzipped_and_plain_read_the_same(db):
    gzipped = timelines.analyse_upload(files=[upload("trace.json.gz", H200.read_bytes())])
    plain = timelines.analyse_upload(files=[upload("trace.json", gzip.decompress(H200.read_bytes()))])

    def without_source(series):
        return [{**rank, "source": ""} for rank in series["ranks"]]

    assert without_source(gzipped.series) == without_source(plain.series)
    assert gzipped.step_count == 3 and gzipped.rank_count == 1
    assert gzipped.files[0]["bytes"] == H200.stat().st_size
    assert gzipped.files[0]["decompressed_bytes"] == len(gzip.decompress(H200.read_bytes()))
    assert gzipped.communication_share == 0 and 0.8 < gzipped.compute_share < 0.9
    assert any("world size 1" in note for note in gzipped.notes)
    assert AuditEntry.objects.filter(object_type="benchmarks.timelineanalysis", action="create").count() == 2


def test_bad_uploads_are_refused_naming_the_file_and_where(db):
    message = refused([upload("lscpu.json", b"Architecture: x86_64\n")])
    assert message.startswith("lscpu.json: line 1, offset 0: expected a Chrome-trace timeline")
    cut = gzip.decompress(H200.read_bytes())[:400_000]
    assert "truncated JSON" in refused([upload("cut.json", cut)])
    assert "named .gz but not gzip" in refused([upload("trace.json.gz", gzip.decompress(H200.read_bytes()))])
    assert "gzip stream is cut off" in refused([upload("t.json.gz", H200.read_bytes()[:20_000])])
    assert "not UTF-8" in refused([upload("binary.json", b"\xff\xfe\x00[")])
    assert "Upload at least one" in refused([])


def test_a_gzip_bomb_is_refused_without_inflating_it(db, monkeypatch):
    bomb = gzip.compress(b"[" + b" " * (64 * 2**20))  # 64 MiB of spaces: ~64 KiB compressed
    monkeypatch.setattr(timelines, "TIMELINE_MAX_TRACE_BYTES", 8 * 2**20)
    message = refused([upload("bomb.json.gz", bomb)])
    assert "over 8 MiB" in message and "gzip bomb" in message  # its trailer already says so


def test_a_gzip_bomb_under_the_size_bound_is_refused_early_by_its_ratio(db):
    bomb = gzip.compress(b"[" + b" " * (64 * 2**20))  # 64 MiB, under the 512 MiB bound: ~1000 to 1
    counter = {"bytes": 0, "decompressed": 0}

    with pytest.raises(timelines._Refused, match="a gzip bomb") as caught:
        for _ in timelines.text_chunks(io.BytesIO(bomb), "bomb.json.gz", counter):
            pass

    assert "inflates" in str(caught.value)
    assert counter["decompressed"] <= timelines.GZIP_RATIO_FROM_BYTES + timelines.CHUNK_BYTES  # not all 64 MiB


def test_a_gzip_file_whose_trailer_declares_too_much_is_refused_before_inflating(db, monkeypatch):
    monkeypatch.setattr(timelines, "TIMELINE_MAX_TRACE_BYTES", 2**20)
    counter = {"bytes": 0, "decompressed": 0}
    big = gzip.compress(b"[" + b" " * (2 * 2**20) + b"]")

    with pytest.raises(timelines._Refused, match="trailer says 2 MiB"):
        next(timelines.text_chunks(io.BytesIO(big), "big.json.gz", counter))

    assert counter["decompressed"] == 0
    assert "trailer says" in refused([upload("big.json.gz", big)])


def test_a_file_over_the_upload_limit_is_refused(db, monkeypatch):
    monkeypatch.setattr(timelines, "TIMELINE_MAX_FILE_BYTES", 2**19)
    assert "over 0.5 MiB as sent" in refused([upload("big.json", gzip.decompress(H200.read_bytes()))])


@pytest.fixture
def training_job(demo_cluster):
    job = TrainingJob.objects.create(name="llm-pretrain", ranks_per_node=8)
    for rank, node in enumerate(Node.objects.filter(hostname__in=["gpu001", "gpu002", "gpu003", "gpu004"])):
        TrainingJobNode.objects.create(job=job, node=node, node_rank=rank)
    return job


def test_traces_from_a_simulated_training_job_slow_nic_and_straggler(training_job, inject):
    healthy = timelines.analyse_training_job(training_job=training_job, steps=3, transport="sim")
    inject("gpu003", "degraded_cable", "ens3np0", rate_gbps=100)
    slow_nic = timelines.analyse_training_job(training_job=training_job, steps=3, transport="sim")
    inject("gpu002", "straggler")
    straggler = timelines.analyse_training_job(training_job=training_job, steps=3, transport="sim")

    assert healthy.rank_count == 32 and healthy.world_size == 32 and healthy.step_count == 3
    assert 0.1 < healthy.communication_share < 0.3 and healthy.exposed_communication_share < 0.02
    # a NIC at a quarter of its rate stretches every gradient bucket's all-reduce
    assert slow_nic.communication_share > 1.8 * healthy.communication_share
    # a straggler's peers wait for it inside NCCL: communication rises, and much of it is no longer hidden
    assert straggler.exposed_communication_share > 5 * healthy.exposed_communication_share
    assert 8 <= straggler.slowest_rank < 16  # one of gpu002's ranks (node rank 1)
    assert straggler.slowest_rank_compute_pct_above_median > 20
    assert healthy.slowest_rank_compute_pct_above_median < 2
    assert straggler.training_job == training_job and straggler.origin == "training-job"


def test_simulated_trace_has_the_real_structure(training_job):
    from apps.simulator import services as simulator
    from apps.simulator.profiler import ddp_traces

    nodes = Node.objects.filter(hostname__in=["gpu001", "gpu002"]).order_by("hostname")
    texts = ddp_traces(
        hosts=[node.hostname for node in nodes],
        states={node.hostname: simulator.node_state(node=node) for node in nodes},
        ranks_per_node=8,
        steps=2,
        seed=1,
        name="x",
    )
    real = json.loads(gzip.decompress(H200.read_bytes()))
    simulated = json.loads(texts[3])
    assert set(simulated) - {"traceEvents"} <= set(real) | {"traceEvents"}
    assert set(simulated["distributedInfo"]) == set(real["distributedInfo"])
    assert simulated["distributedInfo"]["rank"] == 3 and simulated["distributedInfo"]["world_size"] == 16
    for category in ("kernel", "cuda_runtime", "user_annotation"):
        real_keys = {key for event in real["traceEvents"] if event.get("cat") == category for key in event}
        real_args = {key for event in real["traceEvents"] if event.get("cat") == category for key in event["args"]}
        sim = [event for event in simulated["traceEvents"] if event.get("cat") == category]
        assert sim and all(set(event) <= real_keys for event in sim)
        assert all(set(event["args"]) <= real_args for event in sim), category
    # the same reader and breakdown as the real file; every kernel is placed in a step by its launch
    result = breakdown([read_trace([texts[3]])])
    assert [step.step for step in result.ranks[0].steps] == ["1", "2"]


def test_from_a_training_job_over_ssh_is_refused(training_job):
    with pytest.raises(serializers.ValidationError) as caught:
        timelines.analyse_training_job(training_job=training_job, steps=3, transport="ssh")
    assert "transport" in caught.value.detail and not TimelineAnalysis.objects.exists()
    with pytest.raises(serializers.ValidationError) as caught:
        timelines.analyse_training_job(training_job=training_job, steps=0, transport="sim")
    assert "steps" in caught.value.detail


def test_api_upload_series_and_roles(db, api_client, api_as, viewer, operator):
    def body():
        return {"files": [SimpleUploadedFile("rank0.json.gz", H200.read_bytes())], "name": "h200"}

    assert api_client.post("/api/benchmark-timelines/", body(), format="multipart").status_code in (401, 403)
    assert api_as(viewer).post("/api/benchmark-timelines/", body(), format="multipart").status_code == 403

    response = api_as(operator).post("/api/benchmark-timelines/", body(), format="multipart")

    assert response.status_code == 201, response.content
    data = response.json()
    assert data["name"] == "h200" and data["step_count"] == 3 and data["rank_count"] == 1
    assert data["case_study_communication_pct"] == {"before": 35.0, "after": 12.0}
    listed = api_as(viewer).get("/api/benchmark-timelines/").json()
    assert [item["id"] for item in listed["results"]] == [data["id"]]
    series = api_as(viewer).get(f"/api/benchmark-timelines/{data['id']}/series/").json()
    assert [step["step"] for step in series["ranks"][0]["steps"]] == ["2", "3", "4"]
    assert api_as(viewer).get("/api/benchmark-timelines/?colour=red").status_code == 400


def test_a_large_upload_is_a_job_with_progress_and_the_request_answers_202(
    db, api_as, operator, monkeypatch, django_capture_on_commit_callbacks
):
    from apps.benchmarks import timeline_jobs
    from apps.benchmarks.models import TraceUpload
    from apps.jobs.models import Job, JobEvent

    monkeypatch.setattr(timeline_jobs, "BACKGROUND_FROM_BYTES", 1000)  # the 53 KB real trace counts as large

    def files():
        return [SimpleUploadedFile("rank0.json.gz", H200.read_bytes()), SimpleUploadedFile("bad.json", b"[{")]

    client = api_as(operator)

    with django_capture_on_commit_callbacks() as queued:
        good = client.post("/api/benchmark-timelines/", {"files": files()[:1], "name": "h200"}, format="multipart")
    assert good.status_code == 202, good.content
    assert good.json()["kind"] == "timeline-analysis" and good.json()["status"] == "queued"
    assert queued and not TimelineAnalysis.objects.exists()  # queued for a worker; nothing analysed in the request
    job = Job.objects.get(public_id=good.json()["id"])

    assert timeline_jobs.run_analysis(job_public_id=str(job.public_id)) == "succeeded"
    assert timeline_jobs.run_analysis(job_public_id=str(job.public_id)) == "taken"  # a redelivery does nothing

    analysis = TimelineAnalysis.objects.get(job=job)
    assert analysis.name == "h200" and analysis.step_count == 3
    progress = [e.data["progress"] for e in JobEvent.objects.filter(job=job, data__has_key="progress")]
    assert progress == [{"done": 1, "total": 1, "percent": 100}]
    assert not TraceUpload.objects.exists()

    bad = client.post("/api/benchmark-timelines/", {"files": files(), "name": "bad"}, format="multipart")
    assert bad.status_code == 202
    assert timeline_jobs.run_analysis(job_public_id=bad.json()["id"]) == "failed"
    failed = Job.objects.get(public_id=bad.json()["id"])
    assert "bad.json" in failed.summary and TimelineAnalysis.objects.count() == 1
    assert not TraceUpload.objects.exists()


def test_api_bad_upload_answers_400_naming_the_field(db, api_as, operator):
    bad = {"files": [SimpleUploadedFile("t.json", b'{"traceEvents": [{"ph": "X"')]}
    response = api_as(operator).post("/api/benchmark-timelines/", bad, format="multipart")

    assert response.status_code == 400
    assert "files" in response.json() and "truncated JSON" in str(response.json()["files"])
    assert "line 1, offset 17" in str(response.json()["files"])
    assert not TimelineAnalysis.objects.exists()
    nothing = api_as(operator).post("/api/benchmark-timelines/", {}, format="multipart")
    assert nothing.status_code == 400 and "files" in nothing.json()


def test_api_from_training_job_answers_202_with_the_job_that_profiles_it(
    training_job, api_as, operator, viewer, django_capture_on_commit_callbacks
):
    from apps.benchmarks import timeline_jobs
    from apps.jobs.models import Job, JobEvent

    body = {"training_job": "llm-pretrain", "steps": 2}
    url = "/api/benchmark-timelines/from-training-job/"
    assert api_as(viewer).post(url, body, format="json").status_code == 403
    with django_capture_on_commit_callbacks() as queued:
        response = api_as(operator).post(url, body, format="json")
    assert response.status_code == 202, response.content
    job = Job.objects.get(public_id=response.json()["id"])
    assert response["Location"].endswith(f"/api/jobs/{job.public_id}/")
    assert response.json()["kind"] == "timeline-analysis" and response.json()["status"] == "queued"
    assert job.parameters["training_job_name"] == "llm-pretrain" and job.parameters["steps"] == 2
    assert job.requested_by == operator
    assert queued and not TimelineAnalysis.objects.exists()  # nothing profiled in the request

    assert timeline_jobs.run_analysis(job_public_id=str(job.public_id)) == "succeeded"
    progress = [e.data["progress"] for e in JobEvent.objects.filter(job=job, data__has_key="progress").order_by("seq")]
    assert progress[-1] == {"done": 32, "total": 32, "percent": 100}
    assert 5 <= len(progress) <= 21  # every 5 % of the ranks, not one event per rank
    assert [item["percent"] for item in progress] == sorted({item["percent"] for item in progress})

    listed = api_as(viewer).get(f"/api/benchmark-timelines/?job={job.public_id}").json()["results"]
    assert len(listed) == 1 and listed[0]["job"] == str(job.public_id)
    assert listed[0]["training_job"] == "llm-pretrain" and listed[0]["rank_count"] == 32
    assert listed[0]["id"] in Job.objects.get(pk=job.pk).summary
    assert api_as(viewer).get(f"/api/benchmark-timelines/?job={Job().public_id}").json()["results"] == []

    unknown = api_as(operator).post(url, {"training_job": "nope"}, format="json")
    assert unknown.status_code == 400 and "training_job" in unknown.json()
    too_many = api_as(operator).post(url, {"training_job": "llm-pretrain", "steps": 51}, format="json")
    assert too_many.status_code == 400 and "steps" in too_many.json()
    assert Job.objects.count() == 1  # a refused request starts nothing


def test_a_profile_whose_training_job_is_gone_fails_naming_it(training_job, operator):
    from apps.benchmarks import timeline_jobs

    job = timeline_jobs.start_profile(training_job=training_job, steps=1, requested_by=operator)
    training_job.delete()
    assert timeline_jobs.run_analysis(job_public_id=str(job.public_id)) == "failed"
    job.refresh_from_db()
    assert "llm-pretrain no longer exists" in job.summary and not TimelineAnalysis.objects.exists()


def test_profile_from_the_page_shows_its_progress_then_the_analysis(training_job, browser_as, operator, viewer):
    from apps.benchmarks import timeline_jobs
    from apps.jobs.models import Job

    client = browser_as(operator)
    started = client.post("/benchmarks/timelines/from-job/", {"training_job": "llm-pretrain", "steps": "2"})
    job = Job.objects.get(kind="timeline-analysis")
    assert started.status_code == 302 and started.url == f"/benchmarks/timelines/jobs/{job.public_id}/"
    assert not TimelineAnalysis.objects.exists()

    page = browser_as(viewer).get(started.url)  # viewers follow it too
    client = browser_as(operator)
    content = page.content.decode()
    assert page.status_code == 200 and "profile of llm-pretrain" in content
    assert f'hx-get="/benchmarks/timelines/jobs/{job.public_id}/live/"' in content
    assert 'id="timeline-job-bar"' in content
    live = client.get(f"{started.url}live/")
    assert live.status_code == 200 and b"Queued" in live.content and "HX-Redirect" not in live

    timeline_jobs.run_analysis(job_public_id=str(job.public_id))
    analysis = TimelineAnalysis.objects.get(job=job)
    done = client.get(f"{started.url}live/")
    assert done.status_code == 200 and done["HX-Redirect"] == f"/benchmarks/timelines/{analysis.public_id}/"
    reloaded = client.get(started.url)  # a reload or back goes to the analysis
    assert reloaded.status_code == 302 and reloaded.url == f"/benchmarks/timelines/{analysis.public_id}/"

    TrainingJob.objects.create(name="empty", ranks_per_node=8)
    refused = client.post("/benchmarks/timelines/from-job/", {"training_job": "empty", "steps": "2"})
    assert refused.status_code == 400 and b"empty has no nodes" in refused.content
    assert Job.objects.count() == 1
    denied = browser_as(viewer).post("/benchmarks/timelines/from-job/", {"training_job": "llm-pretrain", "steps": "2"})
    assert denied.status_code == 403 and Job.objects.count() == 1


def test_a_failed_profile_stops_the_polling_with_its_reason(training_job, browser_as, operator):
    from apps.benchmarks import timeline_jobs

    job = timeline_jobs.start_profile(training_job=training_job, steps=1, requested_by=operator)
    training_job.delete()
    timeline_jobs.run_analysis(job_public_id=str(job.public_id))

    live = browser_as(operator).get(f"/benchmarks/timelines/jobs/{job.public_id}/live/")
    assert live.status_code == 286 and b"no longer exists" in live.content and b"bar red" in live.content
    page = browser_as(operator).get(f"/benchmarks/timelines/jobs/{job.public_id}/")
    assert page.status_code == 200 and b"hx-get" not in page.content and b"no longer exists" in page.content


def test_pages_upload_detail_and_side_by_side(training_job, browser_as, operator, viewer):
    client = browser_as(operator)
    page = client.get("/benchmarks/timelines/")
    assert page.status_code == 200 and b'id="timeline-upload"' in page.content
    response = client.post(
        "/benchmarks/timelines/upload/", {"files": [SimpleUploadedFile("h200.json.gz", H200.read_bytes())]}
    )
    first = TimelineAnalysis.objects.get()
    assert response.status_code == 302 and response.url == f"/benchmarks/timelines/{first.public_id}/"
    from apps.benchmarks import timeline_jobs

    profiled = client.post("/benchmarks/timelines/from-job/", {"training_job": "llm-pretrain", "steps": "2"})
    timeline_jobs.run_analysis(job_public_id=profiled.url.rstrip("/").rsplit("/", 1)[-1])
    second = TimelineAnalysis.objects.exclude(pk=first.pk).get()

    detail = browser_as(viewer).get(f"/benchmarks/timelines/{second.public_id}/")
    assert detail.status_code == 200
    assert b'data-plotly-figure="step-figure"' in detail.content and b'id="ranks"' in detail.content
    assert b"Slowest rank" in detail.content and b"35 %" in detail.content
    ranks = detail.content.decode().split('id="ranks"')[1].split("</table>")[0]
    assert "<td>GPU kernels</td>" in ranks and "gpu_kernels" not in ranks  # the basis in words, not its key
    figure = detail.context["step_figure"]
    assert [trace["name"] for trace in figure["data"]][0] == "compute only" and figure["layout"]["barmode"] == "stack"
    one_rank = browser_as(viewer).get(f"/benchmarks/timelines/{second.public_id}/?rank=5")
    assert one_rank.context["rank"] == 5

    both = browser_as(viewer).get(f"/benchmarks/timelines/compare/?a={first.public_id}&b={second.public_id}")
    assert both.status_code == 200
    assert b'id="a-shares"' in both.content and b'id="b-shares"' in both.content
    assert b'data-plotly-figure="b-step-figure"' in both.content
    assert browser_as(viewer).get("/benchmarks/timelines/compare/?a=x").status_code == 400


def test_pages_refuse_bad_input_and_viewers(db, browser_as, operator, viewer):
    bad = browser_as(operator).post(
        "/benchmarks/timelines/upload/", {"files": [SimpleUploadedFile("x.json.gz", b"not gzip")]}
    )
    assert bad.status_code == 400 and b"named .gz but not gzip" in bad.content
    assert not TimelineAnalysis.objects.exists()
    denied = browser_as(viewer).post(
        "/benchmarks/timelines/upload/", {"files": [SimpleUploadedFile("h.json.gz", H200.read_bytes())]}
    )
    assert denied.status_code == 403 and not TimelineAnalysis.objects.exists()


def test_cli_prints_the_report_as_json(db, capsys, tmp_path):
    call_command("benchmark", "timeline", str(H200), "--json")
    report = json.loads(capsys.readouterr().out)
    assert report["steps"] == 3 and report["per_rank"][0]["steps"] == 3
    assert report["case_study_communication_pct"] == {"before": 35.0, "after": 12.0}
    assert report["slowest_rank"]["rank"] == 0
    broken = tmp_path / "broken.json"
    broken.write_text('{"traceEvents": [\n{"ph": "X", "ts": 1,')
    with pytest.raises(CommandError, match=r"broken.json: line 2, offset 18: truncated JSON"):
        call_command("benchmark", "timeline", str(broken))
    with pytest.raises(CommandError, match="No such file"):
        call_command("benchmark", "timeline", str(tmp_path / "missing.json"))


def test_a_large_upload_from_the_page_goes_to_its_progress_page(db, browser_as, operator, monkeypatch):
    from apps.benchmarks import timeline_jobs
    from apps.jobs.models import Job

    monkeypatch.setattr(timeline_jobs, "BACKGROUND_FROM_BYTES", 1000)
    client = browser_as(operator)

    response = client.post(
        "/benchmarks/timelines/upload/", {"files": [SimpleUploadedFile("h200.json.gz", H200.read_bytes())]}
    )

    job = Job.objects.get(kind="timeline-analysis")
    assert response.status_code == 302 and response.url.endswith(f"/{job.public_id}/")
    assert not TimelineAnalysis.objects.exists()
    waiting = client.get(response.url)
    assert waiting.status_code == 200 and b"timeline-analysis" in waiting.content
    timeline_jobs.run_analysis(job_public_id=str(job.public_id))
    page = client.get(response.url)
    assert page.status_code == 302 and page.url == f"/benchmarks/timelines/{TimelineAnalysis.objects.get().public_id}/"
