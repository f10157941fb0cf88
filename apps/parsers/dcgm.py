"""dcgmi: `diag` (text table and -j JSON), `discovery -l`, `nvlink -s`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .common import (
    Result,
    end_of_input,
    incomplete,
    load_json_after_preamble,
    require_content,
    require_dict,
    unexpected,
)
from .errors import ParseError

# Result words as the text table and the JSON print them → one vocabulary.
STATUS_WORDS = {"pass": "pass", "fail": "fail", "warn": "warn", "skip": "skip", "not run": "skip", "info": "info"}
STATUS_RANK = {"fail": 3, "warn": 2, "pass": 1, "skip": 0, "info": 0}


def normalise_status(word: str | None) -> str | None:
    if not word:
        return None
    return STATUS_WORDS.get(word.strip().lower(), word.strip().lower())


def overall_status(statuses: list[str | None]) -> str:
    """The worst of several results; 'skip' when nothing ran."""
    ranked = [status for status in statuses if status in STATUS_RANK]
    return max(ranked, key=STATUS_RANK.__getitem__) if ranked else "skip"


@dataclass
class DiagTest(Result):
    name: str
    category: str | None
    status: str
    gpus: str | None  # 'all', or the GPU list the result names
    per_gpu: dict[str, str] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)


@dataclass
class DiagReport(Result):
    """One `dcgmi diag` run: metadata and every test's result."""

    status: str
    tests: list[DiagTest]
    dcgm_version: str | None = None
    driver_version: str | None = None
    gpu_device_ids: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    line: int | None = None  # 1-based, the table's 'Diagnostic | Result' row (text output)
    closed: bool = True  # the text table reached its closing border
    last_category: str | None = None

    def failed(self) -> list[DiagTest]:
        return [test for test in self.tests if test.status == "fail"]


@dataclass
class DiagRuns(Result):
    """Every `dcgmi diag` report found in the input (srun on several nodes prints one each)."""

    status: str
    runs: list[DiagReport]


# --- diag text --------------------------------------------------------------------------------------------------

TABLE_ROW = re.compile(r"^\|(?P<name>[^|]*)\|(?P<value>.*)\|\s*$")
CATEGORY_ROW = re.compile(r"^[+|]-+\s+(?P<name>[A-Za-z][A-Za-z ]*?)\s+-+\+")
RESULT_CELL = re.compile(r"^(Pass|Fail|Warn|Skip|Not Run)\b(?:\s*-\s*(.*))?$", re.IGNORECASE)
GPU_PREFIX = re.compile(r"^GPU (\d+)\b")
# DCGM 4.x prints each test's result per GPU on rows of their own, under the test's row: '|   | GPU0: Pass |'.
GPU_RESULT_ROW = re.compile(r"^GPU(\d+): (Pass|Fail|Warn|Skip|Not Run)$", re.IGNORECASE)
CLOSING_BORDER = re.compile(r"^\+-{5,}\+-{5,}\+$")
METADATA_KEYS = {
    "dcgm version": "dcgm_version",
    "driver version detected": "driver_version",
    "gpu device ids detected": "gpu_device_ids",
}


def parse_dcgm_diag(text: str) -> DiagRuns:
    """dcgmi diag -r N, text table or -j JSON (a 'WARNING:' line before the JSON is allowed)."""
    lines = require_content(text, "dcgmi diag output")
    if any(line.strip().startswith("{") for line in lines) and "DCGM GPU Diagnostic" in text:
        report = parse_dcgm_diag_json(text)
        return DiagRuns(status=report.status, runs=[report])
    runs = _text_runs(lines)
    if not runs:
        raise unexpected(lines, "the dcgmi diag table ('| Diagnostic | Result |')")
    if not any(run.tests for run in runs):
        raise end_of_input(lines, "test rows ('| <test> | Pass |') in the dcgmi diag table")
    result = DiagRuns(status=overall_status([run.status for run in runs]), runs=runs)
    if cut := next((run for run in runs if not run.closed), None):
        raise incomplete(
            lines,
            f"the dcgmi diag table that starts at line {cut.line} stops without its closing border; the sections "
            f"after '{cut.last_category}' (and their results) may be missing",
            result,
        )
    return result


def _text_runs(lines: list[str]) -> list[DiagReport]:
    runs: list[DiagReport] = []
    report: DiagReport | None = None
    category: str | None = None
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if re.match(r"^\|\s*Diagnostic\s*\|\s*Result\s*\|", stripped):
            report = DiagReport(status="skip", tests=[], line=number, closed=False)
            runs.append(report)
            category = None
        elif report is None:
            continue
        elif CLOSING_BORDER.match(stripped):
            report.closed = True
        elif match := CATEGORY_ROW.match(stripped):
            category = report.last_category = match["name"].strip()
        elif match := TABLE_ROW.match(stripped):
            _read_text_row(report, category, match["name"], match["value"])
    for run in runs:
        _finish_messages(run)
        run.status = overall_status([test.status for test in run.tests])
    return runs


def _read_text_row(report: DiagReport, category: str | None, name_cell: str, value_cell: str) -> None:
    name = name_cell.strip()
    value = _cell_text(value_cell)
    last = report.tests[-1] if report.tests else None
    if not name and (match := GPU_RESULT_ROW.match(value_cell.strip())) and last is not None:
        last.per_gpu[match[1]] = normalise_status(match[2])
    elif not name and category == "Metadata":  # a device id list too long for one row
        report.gpu_device_ids += _split_ids(value_cell)
    elif not name:  # wrapped continuation of the cell above
        _continue_cell(last, value)
    elif name.lower() in METADATA_KEYS:
        _set_metadata(report, METADATA_KEYS[name.lower()], value_cell.strip())
    elif name in ("Info", "Warning", "Error") and last is not None:
        last.messages.append(value)
        if name == "Warning" and last.status == "pass":
            last.status = "warn"
    elif match := RESULT_CELL.match(value.strip()):
        gpus = (match[2] or "").strip() or None
        report.tests.append(
            DiagTest(
                name=name,
                category=category,
                status=normalise_status(match[1]),
                gpus="all" if gpus and gpus.lower() == "all" else gpus,
            )
        )


def _cell_text(cell: str) -> str:
    # dcgmi wraps long text at a fixed width (cell width minus the padding), mid-word; keep the raw chunk.
    return cell[1 : len(cell) - 2] if len(cell) > 3 else cell.strip()


def _continue_cell(last: DiagTest | None, chunk: str) -> None:
    if last is not None and last.messages:
        last.messages[-1] += chunk


def _set_metadata(report: DiagReport, attribute: str, value: str) -> None:
    if attribute == "gpu_device_ids":
        report.gpu_device_ids = _split_ids(value)  # 3.x prints '2330,2330', 4.x '26b9, 26b9'
    else:
        setattr(report, attribute, value or None)


def _finish_messages(report: DiagReport) -> None:
    """Strip wrapped messages and fill per-GPU results from 'All', 'GPU: 0, 1' and 'GPU N ...' messages."""
    for test in report.tests:
        test.messages = [message.strip() for message in test.messages]
        if test.per_gpu:  # DCGM 4.x said it per GPU
            continue
        if test.gpus == "all":
            test.per_gpu = {str(index): test.status for index in range(len(report.gpu_device_ids))}
        elif test.gpus:
            test.per_gpu = {gpu: test.status for gpu in re.findall(r"\d+", test.gpus)}
        for message in test.messages:
            if match := GPU_PREFIX.match(message):
                test.per_gpu.setdefault(match[1], test.status)


# --- diag JSON --------------------------------------------------------------------------------------------------


def parse_dcgm_diag_json(text: str) -> DiagReport:
    data, preamble = load_json_after_preamble(text, "dcgmi diag -j JSON")
    diagnostic = require_dict(data, "dcgmi diag -j JSON").get("DCGM GPU Diagnostic")
    if not isinstance(diagnostic, dict):
        raise ParseError("expected a 'DCGM GPU Diagnostic' object in the dcgmi diag JSON", line=1)
    tests = [
        _json_test(test, category.get("category"))
        for category in diagnostic.get("test_categories") or []
        if isinstance(category, dict)
        for test in category.get("tests") or []
        if isinstance(test, dict)  # dcgmi emits null entries between tests
    ]
    metadata = diagnostic.get("metadata") or {}
    return DiagReport(
        status=overall_status([test.status for test in tests]),
        tests=tests,
        dcgm_version=diagnostic.get("version") or metadata.get("DCGM Version"),
        driver_version=diagnostic.get("Driver Version Detected") or metadata.get("Driver Version Detected"),
        gpu_device_ids=_split_ids(diagnostic.get("GPU Device IDs") or metadata.get("GPU Device IDs")),
        warnings=preamble,
    )


def _json_test(test: dict[str, Any], category: str | None) -> DiagTest:
    per_gpu: dict[str, str] = {}
    messages: list[str] = []
    for result in test.get("results") or []:
        if not isinstance(result, dict):
            continue
        status = normalise_status(result.get("status")) or "skip"
        for gpu in _split_ids(result.get("gpu_ids", result.get("gpu_id"))):
            per_gpu[gpu] = status
        messages += _json_messages(result)
    return DiagTest(
        name=str(test.get("name", "")),
        category=category,
        status=overall_status(list(per_gpu.values())),
        gpus=",".join(per_gpu) or None,
        per_gpu=per_gpu,
        messages=messages,
    )


def _json_messages(result: dict[str, Any]) -> list[str]:
    messages = []
    for key in ("warnings", "info"):
        for item in result.get(key) or []:
            text = item.get("warning") or item.get("info") if isinstance(item, dict) else item
            if text:
                messages.append(str(text))
    return messages


def _split_ids(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [str(item) for item in value]
    return [item.strip() for item in str(value).split(",") if item.strip()]


# --- discovery -l -----------------------------------------------------------------------------------------------


@dataclass
class DcgmGpu(Result):
    gpu_id: int
    name: str | None = None
    pci_bus_id: str | None = None
    uuid: str | None = None


@dataclass
class DcgmDiscovery(Result):
    gpus: list[DcgmGpu]
    nvswitches: list[str]
    gpus_reported: int | None = None


def parse_dcgm_discovery(text: str) -> DcgmDiscovery:
    """dcgmi discovery -l."""
    lines = require_content(text, "dcgmi discovery -l output")
    count = next((re.match(r"^(\d+) GPUs? found", line.strip()) for line in lines if "GPU" in line), None)
    if count is None or not count:
        raise unexpected(lines, "dcgmi discovery -l output ('N GPUs found.')")
    gpus: list[DcgmGpu] = []
    switches: list[str] = []
    in_switches = False
    for line in lines:
        match = TABLE_ROW.match(line.strip())
        if "NvSwitches found" in line:
            in_switches = True
        if not match:
            continue
        first, rest = match["name"].strip(), match["value"].strip()
        if in_switches:
            if first.isdigit():
                switches.append(first)
        elif first.isdigit():
            gpus.append(DcgmGpu(gpu_id=int(first)))
        if gpus and not in_switches:
            _discovery_field(gpus[-1], rest)
    return DcgmDiscovery(gpus=gpus, nvswitches=switches, gpus_reported=int(count[1]))


def _discovery_field(gpu: DcgmGpu, cell: str) -> None:
    key, _, value = cell.partition(":")
    value = value.strip()
    if key == "Name":
        gpu.name = value
    elif key == "PCI Bus ID":
        gpu.pci_bus_id = value
    elif key == "Device UUID":
        gpu.uuid = value


# --- nvlink -s --------------------------------------------------------------------------------------------------

LINK_STATES = {"U": "up", "D": "down", "X": "disabled", "_": "not_supported"}


@dataclass
class DcgmLinkEntity(Result):
    entity: str  # gpu | nvswitch
    entity_id: int
    links: list[str]

    @property
    def up(self) -> int:
        return self.links.count("up")


@dataclass
class DcgmNvlinkStatus(Result):
    gpus: list[DcgmLinkEntity]
    nvswitches: list[DcgmLinkEntity]


def parse_dcgm_nvlink(text: str) -> DcgmNvlinkStatus:
    """dcgmi nvlink -s: one row of U/D/X/_ per GPU and NvSwitch."""
    lines = require_content(text, "dcgmi nvlink -s output")
    if not any("NvLink Link Status" in line for line in lines):
        raise unexpected(lines, "the dcgmi nvlink -s banner ('NvLink Link Status')")
    entities: dict[str, list[DcgmLinkEntity]] = {"gpu": [], "nvswitch": []}
    current: DcgmLinkEntity | None = None
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if match := re.match(r"^(gpuId|physicalId) (\d+):$", stripped):
            kind = "gpu" if match[1] == "gpuId" else "nvswitch"
            current = DcgmLinkEntity(entity=kind, entity_id=int(match[2]), links=[])
            entities[kind].append(current)
        elif current is not None and stripped and set(stripped.split()) <= set(LINK_STATES):
            current.links = [LINK_STATES[state] for state in stripped.split()]
            current = None
        elif current is not None and stripped:
            raise ParseError(f"expected link states such as 'U U _', got {stripped!r}", number)
    return DcgmNvlinkStatus(gpus=entities["gpu"], nvswitches=entities["nvswitch"])
