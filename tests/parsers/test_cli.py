"""The `parse TOOL FILE` command core, driven with in-memory streams."""

import io
import json

from apps.parsers.cli import main

from .helpers import REAL


def run(argv, stdin_text=""):
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main(argv, io.StringIO(stdin_text), stdout, stderr)
    return code, stdout.getvalue(), stderr.getvalue()


def test_parse_a_file_prints_indented_json():
    code, out, err = run(["nvidia_smi_query", str(REAL / "h200-1gpu/nvidia-smi-query-gpu.csv")])

    assert code == 0 and err == ""
    assert out.startswith('{\n  "source": "query-gpu"')
    assert json.loads(out)["gpus"][0]["memory_total_mib"] == 143771


def test_auto_detects_the_tool_and_reads_gzip():
    code, out, _ = run(["auto", str(REAL / "h200-1gpu/torch-profiler-ddp-trace.json.gz")])

    assert code == 0 and json.loads(out)["compute_basis"] == "gpu_kernels"


def test_stdin_with_dash():
    text = (REAL / "dmesg/gpud-dmesg-with-xid-119.log").read_text()

    code, out, _ = run(["auto", "-"], text)

    assert code == 0 and json.loads(out)["xid_counts"] == {"119": 5}


def test_parse_error_is_one_line_on_stderr_with_file_and_line():
    code, out, err = run(["nvidia_smi_q", "-"], "\nnot nvidia-smi\n")

    expected = "('==============NVSMI LOG==============' or 'GPU <bus id>'), got 'not nvidia-smi'"
    assert code == 1 and out == ""
    assert err == f"error: -: line 2: expected nvidia-smi -q output {expected}\n"


def test_parse_error_names_the_file(tmp_path):
    path = tmp_path / "broken.txt"
    path.write_text("MemTotal: 1 kB\nnonsense\n")

    code, _, err = run(["meminfo", str(path)])

    expected = "expected '/proc/meminfo' lines such as 'MemTotal: 1024 kB', got 'nonsense'"
    assert code == 1 and err == f"error: {path}: line 2: {expected}\n"


def test_auto_that_recognises_nothing_is_a_parse_failure():
    code, _, err = run(["auto", "-"], "nothing recognisable\n")

    assert code == 1 and err.startswith("error: -: line 1: could not tell which tool")


def test_unknown_tool_lists_the_tools():
    code, _, err = run(["nvidia", "x.txt"])

    assert code == 2
    assert err.startswith("error: unknown tool 'nvidia'; known tools: auto, dcgm_diag,")
    assert "nvidia_smi_q" in err and "timeline" in err


def test_usage_errors():
    assert run([])[0] == 2
    code, _, err = run(["lscpu", "/nonexistent/lscpu.txt"])
    assert code == 2 and "No such file" in err
