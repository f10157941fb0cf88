"""A timeline taken from a run on real nodes: the `timeline-trace` job reads each trace file off its node through the
ssh transport (OpenSSH's sshd on 127.0.0.1, host keys verified), as base64 behind a size line, and stores what the
upload path would store. The trace files are placed on the sshd host's file system (this machine) for the test user.
"""

import gzip
import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework import serializers

from apps.benchmarks import timelines
from apps.benchmarks.choices import TIMELINE_MAX_FILE_BYTES, TimelineOrigin
from apps.benchmarks.models import TimelineAnalysis
from apps.inventory.choices import HostKeyState
from apps.inventory.hostkeys import fingerprint_of
from apps.inventory.models import SshHostKey
from apps.jobs.choices import JobStatus, StepStatus
from apps.jobs.models import Job, JobEvent, JobStep
from tests.nodeexec.conftest import sshd  # noqa: F401  (the fixture)
from tests.nodeexec.sshd import keygen
from tests.nodeexec.test_ssh import make_ssh_node, ssh_settings  # noqa: F401
from tests.parsers.helpers import REAL

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

H200 = REAL / "h200-1gpu/torch-profiler-ddp-trace.json.gz"


@pytest.fixture
def on_node(sshd):  # noqa: F811
    """place(name, content) -> the absolute path of a file the test user can read on the sshd host."""
    folder = Path(sshd.root) / "traces"
    folder.mkdir(mode=0o755, exist_ok=True)

    def place(name: str, content: bytes) -> str:
        path = folder / name
        path.write_bytes(content)
        path.chmod(0o644)
        return str(path)

    return place


def take(files, run_shards, **options):
    job = timelines.take_from_nodes(files=files, queue=False, **options)
    return run_shards(job)


def test_a_gzipped_and_a_plain_trace_are_read_off_two_nodes_and_analysed_like_an_upload(
    sshd,  # noqa: F811
    ssh_settings,  # noqa: F811
    on_node,
    run_shards,
):
    first = make_ssh_node(sshd, "trace-node-1", address="127.0.0.1")
    second = make_ssh_node(sshd, "trace-node-2", address="127.0.0.2")
    gz = on_node("rank0.pt.trace.json.gz", H200.read_bytes())
    plain = on_node("rank1.pt.trace.json", gzip.decompress(H200.read_bytes()))

    job = take([{"node": first.hostname, "path": gz}, {"node": second.hostname, "path": plain}], run_shards)

    cells = {cell.hostname: cell for cell in JobStep.objects.filter(job=job)}
    assert job.status == JobStatus.SUCCEEDED, [(c.hostname, c.summary) for c in cells.values()]
    assert cells[first.hostname].summary == "read 1 trace file"
    analysis = TimelineAnalysis.objects.get(job=job)
    assert analysis.origin == TimelineOrigin.NODE and analysis.rank_count == 2
    assert [file["name"] for file in analysis.files] == [f"{first.hostname}:{gz}", f"{second.hostname}:{plain}"]
    assert analysis.files[0]["bytes"] == H200.stat().st_size  # the gzip bytes crossed intact
    assert analysis.files[1]["bytes"] == len(gzip.decompress(H200.read_bytes()))
    # The same figures as the same file uploaded (both ranks are that one real trace).
    uploaded = timelines.analyse_upload(files=[("trace.json.gz", H200.open("rb"))])
    assert analysis.step_count == uploaded.step_count == 3
    assert analysis.compute_share == pytest.approx(uploaded.compute_share)
    assert analysis.series["ranks"][0]["steps"] == uploaded.series["ranks"][0]["steps"]
    # The events show the command and not the file's base64; they name the stored analysis.
    messages = list(JobEvent.objects.filter(job=job).values_list("message", flat=True))
    assert any(
        message.startswith("$ sh -c ") and message.endswith(f"{gz} {TIMELINE_MAX_FILE_BYTES}") for message in messages
    )
    assert len(messages) < 20 and max(len(message) for message in messages) < 2000
    assert any(message.startswith("timeline analysis stored") for message in messages)


def test_files_that_cannot_be_taken_fail_their_cell_with_the_reason_and_store_nothing(
    sshd,  # noqa: F811
    ssh_settings,  # noqa: F811
    on_node,
    run_shards,
):
    node = make_ssh_node(sshd, "trace-bad-1")
    folder = Path(on_node("not-a-trace.json", b'{"hello": 1}\n')).parent
    big = folder / "huge.json"
    with open(big, "wb") as handle:  # sparse: wc -c reads its size without reading it
        handle.truncate(TIMELINE_MAX_FILE_BYTES + 1)
    big.chmod(0o644)
    secret = on_node("private.json", b"[]")
    os.chmod(secret, 0o600)  # root's; the test user may not read it
    fake_gz = on_node("fake.json.gz", gzip.decompress(H200.read_bytes())[:1000])
    cases = {
        f"{folder}/missing.pt.trace.json": "no such file",
        str(big): f"{TIMELINE_MAX_FILE_BYTES + 1} bytes, over {TIMELINE_MAX_FILE_BYTES}",
        secret: "not readable",
        str(folder / "not-a-trace.json"): "a JSON object without",
        fake_gz: "named .gz but not gzip",
    }
    for path, reason in cases.items():
        job = take([{"node": node.hostname, "path": path}], run_shards)
        cell = JobStep.objects.get(job=job)
        assert job.status == JobStatus.FAILED and cell.status == StepStatus.FAILED, (path, cell.summary)
        assert reason in cell.summary, (path, cell.summary)
        assert cell.summary.startswith(path) or cell.summary.startswith(f"{node.hostname}:{path}"), cell.summary
        error = JobEvent.objects.get(job=job, message__startswith="no timeline analysis stored")
        assert reason in error.message
    assert not TimelineAnalysis.objects.exists()


def test_a_node_whose_host_key_changed_is_not_read(sshd, ssh_settings, on_node, run_shards):  # noqa: F811
    node = make_ssh_node(sshd, "trace-impostor", trust=False)
    other = keygen(Path(sshd.root) / "other-host-key")
    SshHostKey.objects.create(
        node=node, public_key=other, fingerprint=fingerprint_of(other), state=HostKeyState.TRUSTED
    )
    path = on_node("rank0.pt.trace.json.gz", H200.read_bytes())

    job = take([{"node": node.hostname, "path": path}], run_shards)

    cell = JobStep.objects.get(job=job)
    assert cell.status == StepStatus.ERROR and cell.summary.startswith("HOST KEY CHANGED"), cell.summary
    assert not TimelineAnalysis.objects.exists()


@pytest.mark.parametrize(
    "path",
    [
        "traces/rank0.json",  # not absolute
        "/tmp/$(reboot).json",
        "/tmp/a;reboot;.json",
        "/tmp/../etc/shadow.json",
        "/tmp/a b.json",
        "/tmp/rank0.txt",  # not a trace's name
        "/tmp/`id`.json.gz",
    ],
)
def test_a_path_that_is_not_a_plain_absolute_trace_path_is_refused_before_anything_runs(sshd, path):  # noqa: F811
    node = make_ssh_node(sshd, "trace-path-1")
    with pytest.raises(serializers.ValidationError) as caught:
        timelines.take_from_nodes(files=[{"node": node.hostname, "path": path}], queue=False)
    assert "path" in str(caught.value.detail["files"][0])
    assert not Job.objects.exists()


def test_unknown_nodes_untrusted_keys_and_other_transports_are_refused(sshd):  # noqa: F811
    stranger = make_ssh_node(sshd, "trace-untrusted", trust=False)
    cases = [
        ({"files": [{"node": "nosuch", "path": "/tmp/t.json"}]}, "files", "No node matches 'nosuch'"),
        ({"files": [{"node": stranger.hostname, "path": "/tmp/t.json"}]}, "files", "No trusted SSH host key"),
        ({"files": []}, "files", "at least one"),
        ({"files": [{"node": stranger.hostname, "path": "/tmp/t.json"}], "transport": "sim"}, "transport", "not 'sim'"),
        ({"files": [{"node": stranger.hostname, "path": "/tmp/t.json"}] * 65}, "files", "At most 64"),
    ]
    for options, field, message in cases:
        with pytest.raises(serializers.ValidationError) as caught:
            timelines.take_from_nodes(queue=False, **options)
        assert message in str(caught.value.detail[field]), (options, caught.value.detail)
    assert not Job.objects.exists()


@pytest.mark.skipif(shutil.which("base64") is None, reason="needs coreutils' base64")
def test_the_read_script_survives_a_path_with_every_allowed_character(sshd, ssh_settings, on_node, run_shards):  # noqa: F811
    node = make_ssh_node(sshd, "trace-chars-1")
    path = on_node("w0_r1@host+x-y.1700000000.pt.trace.json.gz", H200.read_bytes())
    job = take([{"node": node.hostname, "path": path}], run_shards, name="odd name")
    assert job.status == JobStatus.SUCCEEDED, JobStep.objects.get(job=job).summary
    assert TimelineAnalysis.objects.get(job=job).name == "odd name"
    assert subprocess.run(["test", "-f", path]).returncode == 0  # read, not moved


def test_the_api_starts_the_read_for_operators_and_lists_the_analysis_with_its_job(
    sshd,  # noqa: F811
    ssh_settings,  # noqa: F811
    on_node,
    run_shards,
    api_client,
    api_as,
    viewer,
    operator,
):
    node = make_ssh_node(sshd, "trace-api-1")
    path = on_node("rank0.pt.trace.json.gz", H200.read_bytes())
    body = {"files": [{"node": node.hostname, "path": path}], "name": "from the api"}
    url = "/api/benchmark-timelines/from-nodes/"
    assert api_client.post(url, body, format="json").status_code in (401, 403)
    assert api_as(viewer).post(url, body, format="json").status_code == 403
    bad = api_as(operator).post(url, {"files": [{"node": node.hostname, "path": "/tmp/x;id.json"}]}, format="json")
    assert bad.status_code == 400 and "files" in bad.json(), bad.content
    assert not Job.objects.exists()

    answer = api_as(operator).post(url, body, format="json")
    assert answer.status_code == 201, answer.content
    job = run_shards(Job.objects.get(public_id=answer.json()["id"]))

    assert job.kind == "timeline-trace" and job.status == JobStatus.SUCCEEDED
    listed = api_as(viewer).get("/api/benchmark-timelines/").json()["results"]
    assert [(row["name"], row["origin"], row["job"]) for row in listed] == [
        ("from the api", "node", str(job.public_id))
    ]


def test_the_cli_reads_node_files_and_exits_1_naming_what_it_could_not_read(
    sshd,  # noqa: F811
    ssh_settings,  # noqa: F811
    on_node,
):
    node = make_ssh_node(sshd, "trace-cli-1")
    path = on_node("rank0.pt.trace.json.gz", H200.read_bytes())
    out = io.StringIO()
    call_command("benchmark", "timeline", "--from-nodes", f"{node.hostname}:{path}", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert (
        report["origin"] == "node" and report["steps"] == 3 and report["files"][0]["name"] == f"{node.hostname}:{path}"
    )

    with pytest.raises(CommandError) as missing:
        call_command("benchmark", "timeline", "--from-nodes", f"{node.hostname}:{path}.nope.json")
    assert missing.value.returncode == 1 and "no such file" in str(missing.value)
    with pytest.raises(CommandError) as unnamed:
        call_command("benchmark", "timeline", "--from-nodes", path)
    assert "NODE:/absolute/path" in str(unnamed.value)
    assert TimelineAnalysis.objects.count() == 1
