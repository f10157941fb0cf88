"""manage.py triage FILE… [--json]: findings with cited lines, an empty list for an unrecognised log, exit codes."""

import io
import json

import pytest
from django.core.management import call_command

from tests.parsers.helpers import REAL

IB = REAL / "nccl-warn" / "net-ib-error4-vendor-err-81-old-format-h100-ib0-nccl-issue928-partial.txt"
XID = REAL / "dmesg-xid" / "gpud-dmesg-decode-iso-xid13-sm-warp-exceptions-then-xid43-pt_main_thread-partial.txt"
QUIET = (
    REAL
    / "training-logs"
    / "hf-trainer-resume-continuing-from-global-step-200000-will-skip-batches-tqdm-llamafactory-issue1813.txt"
)


def run(*args, stdin=None):
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        call_command("triage", *map(str, args), stdout=out, stderr=err, stdin=stdin)
    except SystemExit as exit_:
        code = exit_.code
    return code, out.getvalue(), err.getvalue()


def test_json_lists_the_findings_of_every_file_with_lines_place_and_runbook():
    code, out, err = run(IB, XID, "--json")

    assert (code, err) == (1, "")
    data = json.loads(out)
    assert [(f["problem"], f["node"], f["gpu"], f["nic"], f["xid"]) for f in data["findings"]] == [
        ("nccl_ib_error", "H100-1", "1", "ib0", None),
        ("nccl_ib_error", "H100-5", "3", "ib0", None),
        ("xid", None, "0000:38:00", None, 13),
        ("xid", None, "0000:38:00", None, 43),
    ]
    first = data["findings"][0]
    assert first["lines"] == [1] and first["excerpt"][0].startswith("H100-1:9821:9920 [1] transport/net_ib.cc:1295")
    assert first["source"] == str(IB) and first["runbook"] == "fabric-link"
    xid13 = data["findings"][2]
    assert xid13["xid_name"] == "Graphics Engine Exception" and xid13["lines"] == list(range(1, 17))
    assert [entry["findings"] for entry in data["files"]] == [2, 2]


def test_an_unrecognised_log_gives_an_empty_list_and_says_so():
    code, out, _ = run(QUIET, "--json")

    data = json.loads(out)
    assert code == 0
    assert data["findings"] == [] and data["recognised"] is False
    assert "No known problem in 3 lines" in data["message"] and "nothing is guessed" in data["message"]


def test_text_output_cites_the_lines():
    code, out, _ = run(IB)
    assert code == 1
    assert "nccl_ib_error: NET/IB completion error, status 4" in out
    assert "where: node H100-1, gpu 1, nic ib0" in out
    assert "     1: H100-1:9821:9920 [1]" in out


def test_standard_input_is_read_with_dash():
    stdin = io.TextIOWrapper(io.BytesIO(b"OSError: [Errno 28] No space left on device\n"))
    code, out, _ = run("-", "--json", stdin=stdin)
    data = json.loads(out)
    assert code == 1
    assert [(f["problem"], f["source"], f["lines"]) for f in data["findings"]] == [("disk_full", "standard input", [1])]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "is binary data, not a text log"), (b"\n\n", "is empty")],
)
def test_binary_or_empty_file_is_refused_naming_it(tmp_path, content, fragment):
    bad = tmp_path / "capture.bin"
    bad.write_bytes(content)

    code, out, err = run(IB, bad, "--json")

    assert (code, out) == (2, "")  # nothing printed for the good file either
    assert str(bad) in err and fragment in err


def test_a_missing_file_is_named(tmp_path):
    code, out, err = run(tmp_path / "nope.log")
    assert (code, out) == (2, "")
    assert "nope.log" in err and "No such file" in err
