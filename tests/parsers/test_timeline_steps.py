"""Chrome traces read as a stream and broken down per step and per rank (apps.parsers.timeline_steps)."""

import gzip
import json

import pytest

from apps.parsers.timeline_steps import TraceError, breakdown, chunks_of, read_trace

from .helpers import REAL, data

H200 = REAL / "h200-1gpu/torch-profiler-ddp-trace.json.gz"


def h200_text() -> str:
    return gzip.decompress(H200.read_bytes()).decode()


def test_the_real_h200_ddp_trace_per_step():
    trace = read_trace(chunks_of(h200_text()), source="h200")
    result = breakdown([trace])

    rank = result.ranks[0]
    assert trace.rank == 0 and result.world_size == 1 and trace.events == 3366
    assert [step.step for step in rank.steps] == ["2", "3", "4"]  # ProfilerStep#2..#4
    for step in rank.steps:
        # the stacked parts add up to the step time, and the kernels keep the GPU busy most of it
        busy = step.compute_us + step.communication_us - step.overlap_us
        assert step.idle_us == pytest.approx(step.duration_us - busy, abs=0.01)
        assert 0.7 < step.compute_us / step.duration_us < 1
    # one GPU: DDP launches no NCCL kernel; the host-side nccl:all_reduce annotations are not device time
    assert rank.communication_us == 0 and rank.compute_basis == "gpu_kernels"
    # step 4 waited longer on the host (its CPU step is 7.8 ms, the others 5.7 ms): more idle
    assert rank.steps[2].idle_us > 4 * rank.steps[0].idle_us
    assert result.compute_share + result.idle_share == pytest.approx(1, abs=0.001)


def test_chunk_size_does_not_change_the_result():
    text = h200_text()
    whole = breakdown([read_trace([text])]).to_dict()
    for size in (1, 7, 4096):
        assert breakdown([read_trace(chunks_of(text, size))]).to_dict() == whole


def test_communication_overlap_and_idle_with_two_ranks():
    def rank_trace(rank: int, compute_end: float) -> str:
        events = [
            {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 90},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 1, "dur": 1,
             "args": {"correlation": 1}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 2, "dur": 1,
             "args": {"correlation": 2}},
            {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 90, "dur": 50},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 91, "dur": 1,
             "args": {"correlation": 3}},
            # step 1 on the GPU: compute 10-compute_end, all-reduce 40-80 (launched in step 1's window)
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10, "dur": compute_end - 10,
             "args": {"correlation": 1}},
            {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "pid": 0, "tid": 20,
             "ts": 40, "dur": 40, "args": {"correlation": 2}},
            # step 2 starts on the GPU at 100 (the 80-100 gap is step 1's idle)
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 100, "dur": 20,
             "args": {"correlation": 3}},
        ]  # fmt: skip
        return json.dumps({"distributedInfo": {"rank": rank, "world_size": 2}, "traceEvents": events})

    result = breakdown([read_trace([rank_trace(1, 60)]), read_trace([rank_trace(0, 50)])])

    assert [rank.rank for rank in result.ranks] == [0, 1]
    first = result.ranks[0].steps[0]
    assert (first.duration_us, first.compute_us, first.communication_us, first.overlap_us, first.idle_us) == (
        90, 40, 40, 10, 20
    )  # fmt: skip
    assert result.ranks[1].steps[0].overlap_us == 20
    assert result.slowest_rank == 1  # more compute per step: the rank the other waits for
    assert result.world_size == 2 and result.step_count == 2


def test_horovod_timeline_without_closing_bracket():
    # Horovod writes the closing ']' only on shutdown: a live timeline ends after a complete event and a comma.
    lines = data("horovod-timeline-partial-invented.json").splitlines(keepends=True)
    live = "".join(line for line in lines if line.strip() == "[" or line.rstrip().endswith(("},", "}")))
    result = breakdown([read_trace(chunks_of(live, 5))])

    rank = result.ranks[0]
    assert rank.truncated and rank.steps[0].step == "all"
    assert rank.communication_us > 0
    assert any("closing ']'" in note for note in result.notes)


@pytest.mark.parametrize(
    ("text", "line", "offset", "fragment"),
    [
        ("", 1, 0, "empty input"),
        ("Architecture: x86_64\n", 1, 0, "expected a Chrome-trace timeline"),
        ('{"traceEvents": [\n{"ph": "X", "ts": 1, "dur": 2},\n{"ph": "X", "ts": ', 3, 50, "truncated JSON"),
        ('{"traceEvents": [{"ph": "X"}]', 1, 29, "truncated JSON"),
        ('{"traceEvents": [{"ph": "X", "ts": 1}\n, {"name": "x"}]}', 2, 40, "'ph' field"),
        ('{"traceEvents": [{"ph": "X", "ts": 1} {"ph": "X"}]}', 1, 38, "expected ',' or"),
        ('{"schemaVersion": 1}', 1, 20, "without 'traceEvents'"),
        ('[{"ph": "X", "ts": 1, "dur": 2},\n{"ph": "X", "ts": 1, "dur": tru', 2, 33, "truncated JSON"),
        (data("horovod-timeline-partial-invented.json"), 12, 723, "truncated JSON"),  # cut inside its last event
        ("[1, 2]", 1, 1, "expected a trace event"),
        ('{"traceEvents": [{"ph": "X", "ts": 1, "dur": 2}]}\n{"x": 1}', 2, 50, "text after"),
    ],
)
def test_not_a_trace_names_the_line_and_offset(text, line, offset, fragment):
    with pytest.raises(TraceError) as caught:
        read_trace(chunks_of(text, 3))
    error = caught.value
    assert (error.line, error.offset) == (line, offset), str(error)
    assert fragment in str(error) and str(error).startswith(f"line {line}, offset {offset}: ")


def test_an_event_longer_than_the_window_is_refused(monkeypatch):
    monkeypatch.setattr("apps.parsers.timeline_steps.MAX_VALUE_CHARS", 100)
    text = '{"traceEvents": [{"ph": "X", "name": "' + "x" * 500 + '"}]}'
    with pytest.raises(TraceError, match="longer than 100 characters"):
        read_trace(chunks_of(text, 10))


def test_a_trace_with_no_duration_events_is_refused():
    with pytest.raises(TraceError, match="no duration events"):
        breakdown([read_trace(['{"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1}]}'])])
