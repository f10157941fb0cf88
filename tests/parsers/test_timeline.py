"""Chrome-trace timelines reduced to compute and communication time."""

import gzip
import json

import pytest

from apps.parsers.timeline import parse_timeline, summarise

from .helpers import REAL, assert_parse_error, data, real


def test_pytorch_ddp_trace_from_the_h200():
    summary = parse_timeline(real("h200-1gpu/torch-profiler-ddp-trace.json.gz"))

    assert summary.compute_basis == "gpu_kernels"
    assert summary.events == 3366 and not summary.truncated
    assert summary.compute_us > summary.communication_us > 0
    assert summary.busy_us == pytest.approx(summary.compute_us + summary.communication_us - summary.overlap_us)
    assert summary.busy_us <= summary.span_us
    assert 0 < summary.communication_share < 1 and 0 < summary.compute_share <= 1
    assert {item["name"] for item in summary.top_communication} >= {"nccl:all_reduce", "c10d::allreduce_"}
    assert summary.processes["416"] == "python3"


def test_gzip_and_plain_text_read_the_same():
    raw = gzip.decompress((REAL / "h200-1gpu/torch-profiler-ddp-trace.json.gz").read_bytes()).decode()

    assert parse_timeline(raw) == parse_timeline(real("h200-1gpu/torch-profiler-ddp-trace.json.gz"))


def test_horovod_partial_timeline_interval_arithmetic():
    summary = parse_timeline(data("horovod-timeline-partial-invented.json"))

    # communication: NEGOTIATE 1000-1100, ALLREDUCE 1100-1350 (NCCL_ALLREDUCE nested inside) → 350 us
    # compute (no GPU kernels, so operators): 900-1200 and 1400-1500 → 400 us; overlap 1000-1200 → 200 us
    assert summary.truncated is True
    assert summary.compute_basis == "operators"
    assert (summary.communication_us, summary.compute_us, summary.overlap_us) == (350, 400, 200)
    assert summary.busy_us == 550 and summary.exposed_communication_us == 150
    assert summary.communication_share == round(350 / 550, 4)
    assert summary.processes == {"1": "allreduce.grad_0"}


def test_a_single_horovod_metadata_line_is_an_empty_timeline():
    summary = parse_timeline(real("horovod/timeline-metadata-line-partial-horovod-issue321.json.txt"))

    assert summary.processes == {"2": "HorovodBroadcast_global_step_0"}
    assert summary.busy_us == 0 and summary.communication_share is None and summary.truncated


def test_summarise_counts_overlapping_kernels_once():
    events = [
        {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 0, "dur": 100},
        {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 50, "dur": 100},
        {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ts": 120, "dur": 80},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 500},
    ]

    summary = summarise(events)

    assert (summary.compute_us, summary.communication_us, summary.overlap_us) == (150, 80, 30)


def test_not_a_timeline_is_rejected():
    assert_parse_error(parse_timeline, "", 1, "empty input")
    assert_parse_error(parse_timeline, real("h200-1gpu/lscpu.txt"), 1, "Chrome-trace")
    assert_parse_error(parse_timeline, json.dumps([{"name": "x"}]), 1, "'ph' field")
    assert_parse_error(parse_timeline, '[\n{"ph": "X", "ts": ', 2, "trace events")
