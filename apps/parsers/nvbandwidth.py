"""nvbandwidth: the text report (one matrix and a SUM line per test case) and the -j JSON report."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .common import Result, clean, end_of_input, load_json, require_content, require_dict, to_float, unexpected
from .errors import ParseError


@dataclass
class Testcase(Result):
    name: str
    status: str  # passed | waived | error | incomplete
    description: str | None = None
    unit: str | None = None  # 'GB/s' for bandwidth, 'ns' for latency
    columns: list[str] = field(default_factory=list)
    rows: list[str] = field(default_factory=list)
    matrix: list[list[float | None]] = field(default_factory=list)
    sum: float | None = None
    min: float | None = None
    max: float | None = None
    average: float | None = None


@dataclass
class NvbandwidthReport(Result):
    version: str | None
    cuda_runtime_version: str | None
    driver_version: str | None
    devices: list[str]
    testcases: list[Testcase]

    def testcase(self, name: str) -> Testcase | None:
        return next((case for case in self.testcases if case.name == name), None)


RUNNING = re.compile(r"^Running (\S+?)\.?$")
SUM_LINE = re.compile(r"^SUM (\S+) (\S+)$")
DEVICE = re.compile(r"^Device (\d+): (.+)$")
UNIT = re.compile(r"\(([^()]+)\)\s*$")
HEADER_FIELDS = {
    "nvbandwidth Version": "version",
    "CUDA Runtime Version": "cuda_runtime_version",
    "Driver Version": "driver_version",
}


def parse_nvbandwidth(text: str) -> NvbandwidthReport:
    """nvbandwidth text output, or its -j JSON."""
    if text.lstrip().startswith("{"):
        return parse_nvbandwidth_json(text)
    lines = require_content(text, "nvbandwidth output")
    header: dict[str, str] = {}
    devices: list[str] = []
    testcases: list[Testcase] = []
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if match := RUNNING.match(line):
            testcases.append(Testcase(name=match[1], status="incomplete"))
        elif testcases:
            _read_testcase_line(testcases[-1], line, number)
        elif match := DEVICE.match(line):
            devices.append(match[2])
        elif ":" in line and line.split(":", 1)[0] in HEADER_FIELDS:
            header[HEADER_FIELDS[line.split(":", 1)[0]]] = line.split(":", 1)[1].strip()
    if not testcases and "version" not in header:
        raise unexpected(lines, "nvbandwidth output ('nvbandwidth Version: ...' or 'Running <testcase>.')")
    if not testcases:
        raise end_of_input(lines, "a 'Running <testcase>.' section")
    for case in testcases:
        _summarise(case)
    return NvbandwidthReport(
        version=header.get("version"),
        cuda_runtime_version=header.get("cuda_runtime_version"),
        driver_version=header.get("driver_version"),
        devices=devices,
        testcases=testcases,
    )


def _read_testcase_line(case: Testcase, line: str, number: int) -> None:
    tokens = line.split()
    if not line:
        return
    if match := SUM_LINE.match(line):
        case.sum = to_float(match[2])
        case.status = "passed"
    elif line.lower().startswith("waived"):
        case.status = "waived"
    elif case.description is None:
        case.description = line
        unit = UNIT.search(line)
        case.unit = unit[1] if unit else None
    elif not case.columns and all(token.isdigit() for token in tokens):
        case.columns = tokens
    elif case.columns and tokens[0].isdigit():
        values = tokens[1:]
        if len(values) != len(case.columns):
            raise ParseError(
                f"expected {len(case.columns)} values in the {case.name} matrix, got {len(values)}", number
            )
        case.rows.append(tokens[0])
        case.matrix.append([to_float(value) for value in values])
    elif "error" in line.lower():
        case.status = "error"


def _summarise(case: Testcase) -> None:
    values = [value for row in case.matrix for value in row if value is not None]
    if values:
        case.min, case.max = min(values), max(values)
        case.average = sum(values) / len(values)
        if case.status == "incomplete":
            case.status = "passed"


def parse_nvbandwidth_json(text: str) -> NvbandwidthReport:
    data = require_dict(load_json(text, "nvbandwidth -j JSON"), "nvbandwidth -j JSON")
    body = data.get("nvbandwidth")
    if not isinstance(body, dict):
        raise ParseError("expected an 'nvbandwidth' object in the JSON", line=1)
    return NvbandwidthReport(
        version=body.get("version"),
        cuda_runtime_version=_text(body.get("CUDA Runtime Version")),
        driver_version=_text(body.get("Driver Version")),
        devices=[str(device) for device in body.get("devices") or []],
        testcases=[_json_testcase(case) for case in body.get("testcases") or [] if isinstance(case, dict)],
    )


def _json_testcase(case: dict[str, Any]) -> Testcase:
    description = clean(case.get("bandwidth_description"))
    matrix = [[to_float(value) for value in row] for row in case.get("bandwidth_matrix") or []]
    unit = UNIT.search(description) if description else None
    return Testcase(
        name=str(case.get("name", "")),
        status=str(case.get("status", "")).strip().lower() or "incomplete",
        description=description,
        unit=unit[1] if unit else None,
        columns=[str(index) for index in range(len(matrix[0]))] if matrix else [],
        rows=[str(index) for index in range(len(matrix))],
        matrix=matrix,
        sum=to_float(case.get("sum")),
        min=to_float(case.get("min")),
        max=to_float(case.get("max")),
        average=to_float(case.get("average")),
    )


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
