"""Every file under tests/fixtures/real/ parses with the parser its folder and name select; new files join in."""

import json

import pytest

from apps.parsers import registry
from apps.parsers.common import Result, read_input
from apps.parsers.errors import IncompleteOutput

from .helpers import REAL, real_fixture_paths

FIXTURES = real_fixture_paths()

# Fixtures published cut (see SOURCES.md): what they declare is more than they hold, so the parser must say
# "incomplete" at the line where the missing part begins, and still hand over what it read.
INCOMPLETE = {
    "nvidia-smi/q-excerpt-a100-80gb-ecc-remapped-rows-partial.txt": 36,  # 'Attached GPUs : 8', one GPU, elided
    "dcgm/dcgmi-diag-l40s-4gpu-dcgm4.2.3-pcie-fail-dcgm-issue253.txt": 50,  # no closing border after Integration
}


def fixture_id(path):
    return str(path.relative_to(REAL))


@pytest.mark.parametrize("path", FIXTURES, ids=fixture_id)
def test_fixture_parses_into_json_ready_result(path):
    tool = registry.tool_for_fixture(path)
    text = read_input(path)

    if fixture_id(path) in INCOMPLETE:
        with pytest.raises(IncompleteOutput) as caught:
            registry.parse(tool, text)
        assert caught.value.line == INCOMPLETE[fixture_id(path)], str(caught.value)
        result = caught.value.partial
    else:
        result = registry.parse(tool, text)

    assert isinstance(result, Result)
    data = result.to_dict()
    assert isinstance(data, dict) and data
    assert json.loads(json.dumps(data)) == data  # plain JSON types only


@pytest.mark.parametrize("path", FIXTURES, ids=fixture_id)
def test_detect_tool_agrees_with_fixture_mapping(path):
    text = read_input(path)
    detected = registry.detect_tool(text, filename=str(path))

    if text.strip():
        tool = registry.tool_for_fixture(path)
        assert detected == registry.DETECTED_AS.get(tool, tool)
    else:  # nvlink -s on a machine without NVLink prints nothing, and nothing names no tool
        assert detected is None


def test_every_listed_incomplete_fixture_exists():
    assert {fixture_id(path) for path in FIXTURES} >= set(INCOMPLETE)


def test_fixture_tree_is_not_empty_and_skips_only_documentation():
    assert len(FIXTURES) >= 100
    assert not any(path.suffix == ".md" for path in FIXTURES)


def test_every_registered_tool_reads_at_least_one_real_fixture():
    covered = {registry.tool_for_fixture(path) for path in FIXTURES}

    assert set(registry.tool_names()) - covered == set()


def test_a_file_no_rule_knows_is_reported_not_guessed(tmp_path):
    stray = tmp_path / "mystery" / "something.bin"

    with pytest.raises(LookupError, match="no parser is mapped"):
        registry.tool_for_fixture(stray)


def test_unknown_tool_name_lists_the_known_ones():
    with pytest.raises(registry.UnknownTool, match="known tools: .*nvidia_smi_q"):
        registry.parse("nvidia_smi_quux", "anything")


def test_detect_tool_uses_content_before_file_name():
    dmesg_text = "[   12.000001] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python, GPU has fallen off the bus.\n"

    assert registry.detect_tool(dmesg_text, filename="lscpu.txt") == "dmesg"
    assert registry.detect_tool("no tool prints this\n") is None
    assert registry.detect_tool("no tool prints this\n", filename="run/hpl-mxp-job.err") == "hpl_mxp"
