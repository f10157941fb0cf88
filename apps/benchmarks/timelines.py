"""Timeline analysis: traces in (uploaded files, or taken from a training job), a stored breakdown out.

Files are read as streams: at most `TIMELINE_MAX_FILE_BYTES` as sent, decompressed (gzip by its magic bytes)
in bounded pieces up to `TIMELINE_MAX_TRACE_BYTES`, decoded as UTF-8 piece by piece and handed to the pure
reader (apps.parsers.timeline_steps), which keeps only what the breakdown needs. A file that is not a trace,
JSON cut off, a `.gz` that is not gzip, a file or its decompressed text over the limit (a gzip bomb): a
ValidationError naming the field (`files`), the file, and the line and offset where that became clear; nothing is
stored then.
"""

from __future__ import annotations

import codecs
import io
import zlib
from collections.abc import Iterator
from typing import IO

from django.conf import settings
from django.db import transaction
from rest_framework import serializers

from apps.benchmarks.choices import (
    CASE_STUDY_COMMUNICATION_PCT,
    TIMELINE_MAX_FILE_BYTES,
    TIMELINE_MAX_FILES,
    TIMELINE_MAX_STEPS,
    TIMELINE_MAX_TRACE_BYTES,
    ComputeBasis,
    TimelineOrigin,
)
from apps.benchmarks.models import TimelineAnalysis
from apps.core import audit
from apps.core.choices import AuditAction
from apps.core.text import counted
from apps.inventory.choices import HostKeyState
from apps.inventory.models import Node
from apps.jobs import services as job_services
from apps.jobs.kinds import get_kind
from apps.jobs.services import TargetSpec
from apps.nodeexec.transports import default_transport
from apps.parsers.timeline_steps import RankTrace, TraceError, breakdown, read_trace
from apps.simulator.traces import simulated_ddp_traces
from apps.workloads.models import TrainingJob

CHUNK_BYTES = 2**20
# Profiler traces gzip about 10-30 to 1; a bomb, a thousand to 1. Judged once this much is inflated.
GZIP_MAX_RATIO = 200
GZIP_RATIO_FROM_BYTES = 16 * 2**20
GZIP_MAGIC = b"\x1f\x8b"
DEFAULT_PROFILED_STEPS = 5
MAX_PROFILED_STEPS = 50


class _Refused(Exception):
    pass


def _raw_pieces(stream: IO[bytes], name: str, counter: dict) -> Iterator[bytes]:
    while True:
        piece = stream.read(CHUNK_BYTES)
        if not piece:
            return
        counter["bytes"] += len(piece)
        if counter["bytes"] > TIMELINE_MAX_FILE_BYTES:
            raise _Refused(
                f"{name}: over {TIMELINE_MAX_FILE_BYTES / 2**20:g} MiB as sent; profile fewer steps, or gzip it"
            )
        yield piece


def _declared_size(stream: IO[bytes]) -> int | None:
    """What a gzip file's trailer (ISIZE) says it decompresses to, modulo 4 GiB; None when the stream cannot seek."""
    try:
        start = stream.tell()
        stream.seek(-4, io.SEEK_END)
        trailer = stream.read(4)
        stream.seek(start)
    except (AttributeError, OSError, ValueError):
        return None
    return int.from_bytes(trailer, "little") if len(trailer) == 4 else None


def text_chunks(stream: IO[bytes], name: str, counter: dict) -> Iterator[str]:
    """The file's text in pieces: gunzipped when it starts with gzip's magic, bounded both ways. A gzip bomb is
    refused before it is inflated where its trailer declares too much, else as soon as it inflates far past what a
    trace compresses to (GZIP_MAX_RATIO), long before the size bound: nothing is parsed for a minute first."""
    pieces = _raw_pieces(stream, name, counter)
    first = next(pieces, b"")
    gzipped = first[:2] == GZIP_MAGIC
    if name.lower().endswith(".gz") and not gzipped and first:
        raise _Refused(f"{name}: named .gz but not gzip (it does not start with gzip's magic bytes 1f 8b)")
    declared = _declared_size(stream) if gzipped else None
    if declared is not None and declared > TIMELINE_MAX_TRACE_BYTES:
        raise _Refused(
            f"{name}: its gzip trailer says {declared / 2**20:.0f} MiB decompressed, over "
            f"{TIMELINE_MAX_TRACE_BYTES / 2**20:g} MiB: refused, a gzip bomb or a trace too large"
        )
    decoder = codecs.getincrementaldecoder("utf-8")()
    inflater = zlib.decompressobj(wbits=31) if gzipped else None

    def decoded(data: bytes, final: bool = False) -> str:
        counter["decompressed"] += len(data)
        if counter["decompressed"] > TIMELINE_MAX_TRACE_BYTES:
            raise _Refused(
                f"{name}: decompresses past {TIMELINE_MAX_TRACE_BYTES / 2**20:g} MiB "
                f"({counter['bytes']} bytes sent so far): refused, a gzip bomb or a trace too large"
            )
        if gzipped and counter["decompressed"] > GZIP_RATIO_FROM_BYTES:
            ratio = counter["decompressed"] / max(counter["bytes"], 1)
            if ratio > GZIP_MAX_RATIO:
                raise _Refused(
                    f"{name}: inflates {ratio:.0f} times its size ({counter['decompressed'] / 2**20:.0f} MiB from "
                    f"{counter['bytes']} bytes), past the {GZIP_MAX_RATIO} a trace compresses to: refused, a gzip bomb"
                )
        try:
            return decoder.decode(data, final)
        except UnicodeDecodeError as error:
            at = counter["decompressed"] - len(data) + error.start
            raise _Refused(f"{name}: not UTF-8 text at byte {at}: not a JSON trace") from None

    def inflate(data: bytes) -> Iterator[str]:
        try:
            out = inflater.decompress(data, CHUNK_BYTES)
            yield decoded(out)
            while inflater.unconsumed_tail:
                out = inflater.decompress(inflater.unconsumed_tail, CHUNK_BYTES)
                yield decoded(out)
        except zlib.error as error:
            raise _Refused(f"{name}: broken gzip data ({error}) after {counter['bytes']} bytes") from None

    if first:
        yield from inflate(first) if inflater else (decoded(first),)
    for piece in pieces:
        yield from inflate(piece) if inflater else (decoded(piece),)
    if inflater is not None and first and not inflater.eof:
        raise _Refused(f"{name}: the gzip stream is cut off (truncated .gz) after {counter['bytes']} bytes")
    yield decoded(b"", final=True)


def read_one(stream: IO[bytes], name: str) -> tuple[RankTrace, dict]:
    """One file read as an upload is: its trace and facts, or a ValidationError on `files` naming it."""
    counter = {"bytes": 0, "decompressed": 0}
    try:
        trace = read_trace(text_chunks(stream, name, counter), source=name)
    except _Refused as error:
        raise serializers.ValidationError({"files": [str(error)]}) from None
    except TraceError as error:
        raise serializers.ValidationError({"files": [f"{name}: {error}"]}) from None
    return trace, {
        "name": name,
        "bytes": counter["bytes"],
        "decompressed_bytes": counter["decompressed"],
        "events": trace.events,
        "rank": trace.rank,
    }


def store(*, name: str, traces: list[RankTrace], files: list[dict], origin: str, training_job, requested_by, job=None):
    try:
        result = breakdown(traces)
    except TraceError as error:
        raise serializers.ValidationError({"files": [str(error)]}) from None
    ranks = []
    for rank in result.ranks:
        data = rank.to_dict()
        if len(data["steps"]) > TIMELINE_MAX_STEPS:
            data["steps_left_out"] = len(data["steps"]) - TIMELINE_MAX_STEPS
            data["steps"] = data["steps"][:TIMELINE_MAX_STEPS]
        ranks.append(data)
    notes = list(result.notes)
    if result.world_size == 1:
        notes.append("world size 1: DDP launches no NCCL kernel, so the GPU shows no communication")
    user = requested_by if getattr(requested_by, "is_authenticated", False) else None
    with transaction.atomic():
        analysis = TimelineAnalysis.objects.create(
            name=name[:200],
            origin=origin,
            training_job=training_job,
            job=job,
            files=files,
            rank_count=len(result.ranks),
            world_size=result.world_size,
            step_count=result.step_count,
            step_us=result.step_us,
            compute_share=result.compute_share,
            communication_share=result.communication_share,
            overlap_share=result.overlap_share,
            exposed_communication_share=result.exposed_communication_share,
            idle_share=result.idle_share,
            slowest_rank=result.slowest_rank,
            slowest_rank_compute_pct_above_median=result.slowest_rank_compute_pct_above_median,
            series={"ranks": ranks},
            notes=notes,
            requested_by=user,
        )
        audit.record(
            AuditAction.CREATE,
            obj=analysis,
            object_repr=f"timeline analysis {analysis.name}",
            changes={"origin": [None, origin], "ranks": [None, analysis.rank_count], "files": [None, len(files)]},
            user=user,
        )
    return analysis


def analyse_upload(*, files: list[tuple[str, IO[bytes]]], name: str = "", requested_by=None) -> TimelineAnalysis:
    """Read each file (one rank's trace each, or one Horovod timeline) and store the breakdown."""
    if not files:
        raise serializers.ValidationError({"files": ["Upload at least one trace (.json or .json.gz)."]})
    if len(files) > TIMELINE_MAX_FILES:
        raise serializers.ValidationError({"files": [f"At most {TIMELINE_MAX_FILES} files (one trace per rank)."]})
    traces, described = [], []
    for filename, stream in files:
        trace, info = read_one(stream, filename or "trace")
        traces.append(trace)
        described.append(info)
    return store(
        name=name or (files[0][0] if len(files) == 1 else f"{files[0][0]} +{len(files) - 1}"),
        traces=traces,
        files=described,
        origin=TimelineOrigin.UPLOAD,
        training_job=None,
        requested_by=requested_by,
    )


def take_from_nodes(
    *, files: list[dict], name: str = "", training_job=None, transport: str = "", requested_by=None, queue=True
):
    """Start a `timeline-trace` job that reads each file ({"node", "path"}, in rank order) off its node and, once
    every file has been read and parsed, stores the analysis (origin node, linked to the job). Returns the Job.

    Refused before anything is stored (ValidationError naming the field): no files or more than 64, a path that is
    not an absolute .json / .json.gz path of plain segments, an unknown node, a transport other than ssh,
    over ssh a node without a trusted host key (nothing is read from a node whose key is not verified)."""
    errors: dict[str, list[str]] = {}
    kind = get_kind("timeline-trace")
    transport = transport or default_transport(offered=kind.transports)
    if transport not in kind.transports:
        errors["transport"] = [f"Traces are read off nodes over {' or '.join(kind.transports)}, not {transport!r}."]
    if not isinstance(files, list) or not files:
        errors["files"] = ["Name at least one trace file: node and absolute path."]
    elif len(files) > TIMELINE_MAX_FILES:
        errors["files"] = [f"At most {TIMELINE_MAX_FILES} files (one trace per rank)."]
    if errors:
        raise serializers.ValidationError(errors)
    parameters = {"files": files, "name": name, "training_job": getattr(training_job, "pk", None)}
    checked = kind.validate(parameters)
    hostnames = sorted({file["node"] for file in checked["files"]})
    nodes = {node.hostname: node for node in Node.objects.filter(hostname__in=hostnames)}
    unknown = [hostname for hostname in hostnames if hostname not in nodes]
    if unknown:
        raise serializers.ValidationError({"files": [f"No node matches {', '.join(map(repr, unknown[:20]))}."]})
    if len(hostnames) > settings.RACKPILOT_JOB_SHARD_SIZE:
        raise serializers.ValidationError({"files": [f"At most {settings.RACKPILOT_JOB_SHARD_SIZE} nodes at once."]})
    if transport == "ssh":
        trusted = set(
            Node.objects.filter(hostname__in=hostnames, host_keys__state=HostKeyState.TRUSTED).values_list(
                "hostname", flat=True
            )
        )
        untrusted = [hostname for hostname in hostnames if hostname not in trusted]
        if untrusted:
            raise serializers.ValidationError(
                {
                    "files": [
                        f"No trusted SSH host key for {', '.join(untrusted[:20])}: trust it on the node page first."
                    ]
                }
            )
    return job_services.create_job(
        kind="timeline-trace",
        targets=TargetSpec(nodes=tuple(hostnames)),
        parameters=checked,
        transport=transport,
        requested_by=requested_by,
        queue=queue,
    )


def store_read(*, job, read: list[tuple[RankTrace, dict]]) -> TimelineAnalysis:
    """The analysis of what a timeline-trace job read (each file's trace and facts, in rank order)."""
    parameters = job.parameters
    sources = [facts["name"] for _trace, facts in read]
    training_job = None
    if parameters.get("training_job"):
        training_job = TrainingJob.objects.filter(pk=parameters["training_job"]).first()
    return store(
        name=parameters.get("name") or (sources[0] if len(sources) == 1 else f"{sources[0]} +{len(sources) - 1}"),
        traces=[trace for trace, _facts in read],
        files=[facts for _trace, facts in read],
        origin=TimelineOrigin.NODE,
        training_job=training_job,
        requested_by=job.requested_by,
        job=job,
    )


def check_profile(*, training_job, steps, transport: str | None = None) -> list:
    """The training job's members in node-rank order, or a ValidationError naming the field (steps outside 1–50, a
    transport other than sim, a job without nodes or on nodes without GPUs). Nothing is stored either way."""
    members = sorted(training_job.members.select_related("node"), key=lambda member: member.node_rank)
    transport = transport or default_transport(nodes=[member.node for member in members])
    errors = {}
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_PROFILED_STEPS:
        errors["steps"] = [f"Profile 1 to {MAX_PROFILED_STEPS} steps, not {steps!r}."]
    if transport != "sim":
        errors["transport"] = [
            "Traces are modelled for simulated training jobs only (transport sim); on real nodes run the PyTorch "
            "profiler there and read its files off the nodes (from-nodes) or upload them."
        ]
    if not members:
        errors["training_job"] = [f"{training_job.name} has no nodes."]
    elif any(member.node.gpu_sku_id is None for member in members):
        errors["training_job"] = [f"{training_job.name} runs on nodes without GPUs."]
    if errors:
        raise serializers.ValidationError(errors)
    return members


def analyse_training_job(
    *,
    training_job,
    steps: int = DEFAULT_PROFILED_STEPS,
    transport: str | None = None,
    requested_by=None,
    job=None,
    progress=None,
) -> TimelineAnalysis:
    """Profile `steps` steps of a training job on every rank and store the breakdown (linked to `job`, the
    timeline-analysis job that ran it: apps.benchmarks.timeline_jobs). `progress(done, total)` is called as each
    rank's trace is read.

    Over the simulator the traces come from its model of a DDP step on the job's nodes (their faults included);
    on real nodes the profiler runs there and take_from_nodes reads its files."""
    members = check_profile(training_job=training_job, steps=steps, transport=transport)
    texts = simulated_ddp_traces(
        nodes=[member.node for member in members],
        ranks_per_node=training_job.ranks_per_node,
        steps=steps,
        seed=settings.RACKPILOT_SIM_SEED,
        name=training_job.name,
    )
    traces, described = [], []
    for done, (rank, text) in enumerate(sorted(texts.items()), start=1):
        trace, info = read_one(io.BytesIO(text.encode()), f"rank{rank}.pt.trace.json")
        traces.append(trace)
        described.append(info)
        if progress is not None:
            progress(done, len(texts))
    return store(
        name=f"{training_job.name}: {counted(steps, 'step')}",
        traces=traces,
        files=described,
        origin=TimelineOrigin.TRAINING_JOB,
        training_job=training_job,
        requested_by=requested_by,
        job=job,
    )


def report(analysis: TimelineAnalysis) -> dict:
    """What the CLI prints with --json and the API's result: the shares, the case study, each rank and step."""
    ranks = analysis.series.get("ranks", [])
    slowest = next((rank for rank in ranks if rank["rank"] == analysis.slowest_rank), None)
    return {
        "analysis": str(analysis.public_id),
        "name": analysis.name,
        "origin": analysis.origin,
        "ranks": analysis.rank_count,
        "world_size": analysis.world_size,
        "steps": analysis.step_count,
        "step_ms": round(analysis.step_us / 1000, 3),
        "compute_share": analysis.compute_share,
        "communication_share": analysis.communication_share,
        "overlap_share": analysis.overlap_share,
        "exposed_communication_share": analysis.exposed_communication_share,
        "idle_share": analysis.idle_share,
        "case_study_communication_pct": CASE_STUDY_COMMUNICATION_PCT,
        "slowest_rank": None
        if slowest is None
        else {
            "rank": slowest["rank"],
            "source": slowest["source"],
            "step_ms": round(slowest["step_us"] / 1000, 3),
            "compute_ms": round(slowest["compute_us"] / 1000, 3),
            "compute_pct_above_median": analysis.slowest_rank_compute_pct_above_median,
        },
        "per_rank": [
            {
                "rank": rank["rank"],
                "source": rank["source"],
                "compute_basis": rank["compute_basis"],
                "compute_basis_label": ComputeBasis(rank["compute_basis"]).label,
                "steps": len(rank["steps"]),
                "step_ms": round(rank["step_us"] / 1000, 3),
                "compute_ms": round(rank["compute_us"] / 1000, 3),
                "communication_ms": round(rank["communication_us"] / 1000, 3),
                "overlap_ms": round(rank["overlap_us"] / 1000, 3),
                "idle_ms": round(rank["idle_us"] / 1000, 3),
                "communication_share": rank["communication_share"],
                "exposed_communication_share": rank["exposed_communication_share"],
            }
            for rank in ranks
        ],
        "files": analysis.files,
        "notes": analysis.notes,
    }
