"""The plain-text log reader: prefixes taken off with what they say, binary and empty input refused."""

import pytest

from apps.parsers import logs
from apps.parsers.common import split_lines
from apps.parsers.errors import ParseError
from apps.parsers.storage import parse_storage_stalls

from .helpers import real


@pytest.mark.parametrize(
    ("raw", "message", "rank", "node", "gpu"),
    [
        (
            "[rank3]:[E416 20:40:12.98 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught",
            "Watchdog caught",
            3,
            None,
            None,
        ),
        ("(WorkerDict pid=63294) [rank3]:[E416 20:40:12.9 x.cpp:1] [PG 5 Rank 3] Timeout", "Timeout", 3, None, None),
        ("(Worker pid=1, ip=10.0.0.7) hello", "hello", None, "10.0.0.7", None),
        ("[1,5]<stderr>:gpu7:11:22 [5] NCCL WARN boom", "NCCL WARN boom", 5, "gpu7", "5"),
        (
            "dgxh100-3:225140:225355 [0] misc/ibvwrap.cc:187 NCCL WARN Call",
            "misc/ibvwrap.cc:187 NCCL WARN Call",
            None,
            "dgxh100-3",
            "0",
        ),
        (
            "E0325 20:57:27.620000 2606 site-packages/torch/api.py:869] failed (exitcode: -9)",
            "failed (exitcode: -9)",
            None,
            None,
            None,
        ),
        ("[  +0.000844] nvidia 0000:03:00.0: AER: x", "nvidia 0000:03:00.0: AER: x", None, None, None),
        ("[Sun Feb 23 16:24:18 2025] NVRM: Xid", "NVRM: Xid", None, None, None),
        ("kern  :warn  : 2025-01-21T04:41:44,283302+00:00 NVRM: Xid", "NVRM: Xid", None, None, None),
        (
            "6,3964,206764307,-;nvidia-nvswitch2: open (major=510)",
            "nvidia-nvswitch2: open (major=510)",
            None,
            None,
            None,
        ),
        ("May 23 12:49:52 mgmt1 slurmctld[80708]: slurmctld: error", "slurmctld: error", None, "mgmt1", None),
        ("kernel: NVRM: Xid (PCI:0000:dc:00): 45", "NVRM: Xid (PCI:0000:dc:00): 45", None, None, None),
        ("\x1b[31m0: plain srun line\x1b[0m  ", "plain srun line", None, None, None),  # srun's task id is not a rank
    ],
)
def test_prefixes_are_taken_off_keeping_rank_node_and_gpu(raw, message, rank, node, gpu):
    line = logs.read_line(7, raw)
    assert (line.line, line.message, line.rank, line.node, line.gpu) == (7, message, rank, node, gpu)
    assert "\x1b" not in line.text and line.text == line.text.rstrip()


def test_parse_log_reads_a_real_training_log():
    result = logs.parse_log(
        real("pytorch-nccl/watchdog-reduce-scatter-base-timeout-multirank-pg1-llamafactory-issue6269-partial.txt")
    )
    assert (result.lines, result.ranks, result.nodes) == (5, [0, 3, 4], [])


def test_blank_lines_keep_their_numbers():
    result = logs.parse_log("a\n\n\nb\n")
    assert [(entry.line, entry.message) for entry in result.entries] == [(1, "a"), (4, "b")]


@pytest.mark.parametrize("text", ["", "\n \n"])
def test_empty_input_is_refused(text):
    with pytest.raises(ParseError, match="empty input"):
        logs.parse_log(text)


def test_binary_bytes_are_refused_and_text_with_a_stray_control_byte_is_not():
    assert logs.looks_binary(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert logs.looks_binary(bytes(range(256)) * 4)
    assert not logs.looks_binary(b"")
    assert not logs.looks_binary(("step 1 loss 2.0\n" * 200).encode() + b"\x07")
    assert not logs.looks_binary("ошибка NCCL WARN timeout\n".encode())
    with pytest.raises(ParseError, match="binary data"):
        logs.decode_log(b"\x7fELF\x02\x01\x01\x00\x00\x00")
    assert logs.decode_log(b"ok \xff\n") == "ok \ufffd\n"
    with pytest.raises(ParseError, match="binary data") as caught:
        logs.parse_log("line one\nline\x00two\n")
    assert caught.value.line == 2


# --- line numbers are the ones `grep -n` shows (issue 27) -------------------------------------------------------


def test_split_lines_breaks_at_line_feeds_only():
    text = "a\rb\r\nc\x0bd\x0ce\x1cf\x85g\u2028h\ni\n"

    assert split_lines(text) == ["a\rb", "c\x0bd\x0ce\x1cf\x85g\u2028h", "i", ""]


def test_a_progress_bar_of_bare_carriage_returns_is_one_line():
    text = (
        "step 1 loss 2.5\n"
        "  10%|#         | 1/10\r  50%|#####     | 5/10\r 100%|##########| 10/10\n"
        "node7:1:2 [0] NCCL WARN NET/IB : Got completion from peer with error 12\n"
    )

    warn = next(entry for entry in logs.parse_log(text).entries if "NCCL WARN" in entry.text)

    grep_n = next(number for number, line in enumerate(text.split("\n"), start=1) if "NCCL WARN" in line)
    assert warn.line == grep_n == 3


def test_storage_stalls_cite_the_grep_line_after_a_progress_bar():
    text = "copy  10%\rcopy 100%\n[  12.5] nfs: server nas1 not responding, still trying\n"

    (stall,) = parse_storage_stalls(text).stalls

    assert stall.line == 2
