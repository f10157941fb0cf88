"""nccl-tests (all_reduce_perf and friends): text output in every header generation, and the -J JSON report."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from .common import (
    Result,
    load_json,
    require_content,
    require_dict,
    strip_ansi,
    strip_launcher_prefix,
    to_float,
    to_int,
    unexpected,
)
from .errors import ParseError


@dataclass
class Placement(Result):
    """One half of a row: out-of-place or in-place timings."""

    time_us: float | None
    algbw_gb_per_s: float | None
    busbw_gb_per_s: float | None
    wrong: int | None = None
    error: float | None = None  # old tables print a max relative error instead of #wrong


@dataclass
class NcclRow(Result):
    size_bytes: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    out_of_place: Placement
    in_place: Placement


@dataclass
class NcclDevice(Result):
    rank: int
    host: str
    device: int
    pci_bus: str | None
    name: str
    pid: int | None = None
    group: int | None = None


@dataclass
class NcclTestResult(Result):
    """A run of one nccl-tests binary. A run that failed before its table is still a result, with ``errors``."""

    collective: str | None = None
    status: str = "incomplete"  # completed | failed | incomplete
    rows: list[NcclRow] = field(default_factory=list)
    avg_busbw_gb_per_s: float | None = None
    out_of_bounds: int | None = None
    errors: list[str] = field(default_factory=list)
    nccl_version: str | None = None
    nccl_tests_version: str | None = None
    devices: list[NcclDevice] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)

    @property
    def peak_busbw_gb_per_s(self) -> float | None:
        values = [row.out_of_place.busbw_gb_per_s for row in self.rows if row.out_of_place.busbw_gb_per_s is not None]
        return max(values) if values else None

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        data["peak_busbw_gb_per_s"] = self.peak_busbw_gb_per_s
        return data


def nccl_version_from_code(code: int | str | None) -> str | None:
    """NCCL_VERSION_CODE → '2.28.3' (22803); codes before 2.9 were major*1000 + minor*100 + patch."""
    number = to_int(code)
    if number is None or number <= 0:
        return None
    if number >= 20900:
        return f"{number // 10000}.{number // 100 % 100}.{number % 100}"
    return f"{number // 1000}.{number // 100 % 10}.{number % 100}"


def collective_from_binary(name: str | None) -> str | None:
    """'./build/all_reduce_perf' → 'all_reduce'."""
    if not name:
        return None
    base = os.path.basename(name.strip())
    return base[: -len("_perf")] if base.endswith("_perf") else base or None


# --- text -------------------------------------------------------------------------------------------------------

VERSION_LINE = re.compile(r"^#\s*nccl-tests version (\S+)(?:.*nccl-library=(\d+))?")
START_LINE = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
PARAMETER_LINE = re.compile(r"^#\s*nThread\s")
PARAMETER = re.compile(
    r"(nThread|nGpus|minBytes|maxBytes|step:|warmup iters:|agg iters:|iters:|validation:|graph:|unalign:)\s+(\S+)"
)
PARAMETER_NAMES = {"nThread": "nthreads", "nGpus": "ngpus", "minBytes": "min_bytes", "maxBytes": "max_bytes"}
# -J spells some parameters differently; fold them onto the text names.
JSON_PARAMETER_NAMES = {
    "minimum_bytes": "min_bytes",
    "maximum_bytes": "max_bytes",
    "iterations": "iters",
    "aggregated_iterations": "agg_iters",
}
DEVICE_LINE = re.compile(
    r"^#\s+Rank\s+(\d+)(?:\s+Group\s+(\d+))?\s+Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]\s+(.*?)\s*$"
)
NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")
AVG_BUSBW = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
DATA_ROW = re.compile(r"^\s*\d+\s+\d+\s+\S+")
FAILURE = re.compile(
    r"(Test (?:CUDA |NCCL )?failure.*|Invalid number of GPUs.*|Please check the number of processes.*|"
    r"NCCL WARN .*|Cuda failure .*)"
)
# Columns of the current table format, for tables whose header line was cut off.
NEW_TABLE_COLUMNS = ["size", "count", "type", "redop", "root"] + ["time", "algbw", "busbw", "#wrong"] * 2


@dataclass
class _TextState:
    columns: list[str] = field(default_factory=lambda: list(NEW_TABLE_COLUMNS))
    recognised: bool = False
    result: NcclTestResult = field(default_factory=NcclTestResult)


def parse_nccl_tests(text: str) -> NcclTestResult:
    """nccl-tests output: text (any header generation, launcher prefixes allowed) or the -J JSON file."""
    if text.lstrip().startswith("{"):
        return parse_nccl_tests_json(text)
    lines = require_content(text, "nccl-tests output")
    state = _TextState()
    for number, raw in enumerate(lines, start=1):
        _read_text_line(state, strip_launcher_prefix(strip_ansi(raw)).rstrip(), number)
    if not state.recognised:
        raise unexpected(lines, "nccl-tests output (a '# nThread ...' line, the results table or a test failure)")
    result = state.result
    result.status = _status(result)
    return result


def _read_text_line(state: _TextState, line: str, number: int) -> None:
    result = state.result
    stripped = line.strip()
    if match := VERSION_LINE.match(stripped):
        result.nccl_tests_version = match[1]
        result.nccl_version = result.nccl_version or nccl_version_from_code(match[2])
    elif match := START_LINE.match(stripped):
        result.collective = collective_from_binary(match[1])
    elif PARAMETER_LINE.match(stripped):
        result.parameters = _parameters(stripped)
        state.recognised = True
    elif match := DEVICE_LINE.match(stripped):
        result.devices.append(_device(match))
    elif _is_table_header(stripped):
        state.columns = stripped.lstrip("#").split()
        state.recognised = True
    elif match := OUT_OF_BOUNDS.match(stripped):
        result.out_of_bounds = int(match[1])
    elif match := AVG_BUSBW.match(stripped):
        result.avg_busbw_gb_per_s = to_float(match[1])
        state.recognised = True
    elif failure := FAILURE.search(line):
        _add_error(result, failure[1])
        state.recognised = state.recognised or "NCCL WARN" not in failure[1]
    elif DATA_ROW.match(line):
        result.rows.append(_row(state.columns, line.split(), number))
        state.recognised = True
    elif match := NCCL_VERSION.search(line):
        result.nccl_version = match[1]


def _is_table_header(line: str) -> bool:
    tokens = line.lstrip("#").split()
    return line.startswith("#") and "size" in tokens and "busbw" in tokens


def _parameters(line: str) -> dict[str, Any]:
    parameters: dict[str, Any] = {}
    for key, value in PARAMETER.findall(line):
        name = PARAMETER_NAMES.get(key) or key.rstrip(":").replace(" ", "_")
        parameters[name] = int(value) if value.isdigit() else value
    return parameters


def _device(match: re.Match) -> NcclDevice:
    return NcclDevice(
        rank=int(match[1]),
        group=to_int(match[2]),
        pid=int(match[3]),
        host=match[4],
        device=int(match[5]),
        pci_bus=match[6],
        name=match[7],
    )


def _add_error(result: NcclTestResult, message: str) -> None:
    message = message.strip()
    if message not in result.errors:
        result.errors.append(message)


def _row(columns: list[str], tokens: list[str], number: int) -> NcclRow:
    if len(tokens) != len(columns):
        raise ParseError(f"expected {len(columns)} columns in the results table, got {len(tokens)}", number)
    split = columns.index("time")
    head = dict(zip(columns[:split], tokens[:split], strict=True))
    return NcclRow(
        size_bytes=int(head["size"]),
        count=int(head["count"]),
        dtype=head.get("type", ""),
        redop=head.get("redop"),
        root=to_int(head.get("root")),
        out_of_place=_placement(columns[split : split + 4], tokens[split : split + 4]),
        in_place=_placement(columns[split + 4 : split + 8], tokens[split + 4 : split + 8]),
    )


def _placement(columns: list[str], tokens: list[str]) -> Placement:
    values = dict(zip(columns, tokens, strict=True))
    return Placement(
        time_us=to_float(values.get("time")),
        algbw_gb_per_s=to_float(values.get("algbw")),
        busbw_gb_per_s=to_float(values.get("busbw")),
        wrong=to_int(values.get("#wrong")),
        error=to_float(values.get("error")),
    )


def _status(result: NcclTestResult) -> str:
    if result.errors:
        return "failed"
    return "completed" if result.avg_busbw_gb_per_s is not None else "incomplete"


# --- -J JSON ----------------------------------------------------------------------------------------------------


def parse_nccl_tests_json(text: str) -> NcclTestResult:
    data = require_dict(load_json(text, "nccl-tests -J JSON"), "nccl-tests -J JSON")
    if "results" not in data and "config" not in data:
        raise ParseError("expected nccl-tests -J JSON with 'config' and 'results', got other JSON", line=1)
    config = data.get("config") or {}
    errors = [message for message in data.get("errors") or [] if isinstance(message, str) and message.strip()]
    result = NcclTestResult(
        collective=collective_from_binary((data.get("args") or [None])[0]),
        rows=[_json_row(item) for item in data.get("results") or []],
        avg_busbw_gb_per_s=to_float((data.get("average_bus_bandwidth") or {}).get("bandwidth")),
        out_of_bounds=to_int((data.get("out_of_bounds") or {}).get("count")),
        errors=errors,
        nccl_version=nccl_version_from_code(data.get("nccl_version")),
        devices=[_json_device(item) for item in config.get("devices") or []],
        parameters={JSON_PARAMETER_NAMES.get(key, key): value for key, value in config.items() if key != "devices"},
    )
    result.status = _status(result)
    return result


def _json_row(item: dict[str, Any]) -> NcclRow:
    return NcclRow(
        size_bytes=int(item["size"]),
        count=int(item["count"]),
        dtype=str(item.get("type", "")),
        redop=item.get("redop"),
        root=to_int(str(item.get("root", "")).strip()),
        out_of_place=_json_placement(item.get("out_of_place") or {}),
        in_place=_json_placement(item.get("in_place") or {}),
    )


def _json_placement(item: dict[str, Any]) -> Placement:
    return Placement(
        time_us=to_float(item.get("time")),
        algbw_gb_per_s=to_float(item.get("alg_bw")),
        busbw_gb_per_s=to_float(item.get("bus_bw")),
        wrong=to_int(item.get("nwrong")),
    )


def _json_device(item: dict[str, Any]) -> NcclDevice:
    return NcclDevice(
        rank=int(item.get("rank", 0)),
        group=to_int(item.get("group")),
        pid=to_int(item.get("pid")),
        host=str(item.get("hostname", "")),
        device=int(item.get("device", 0)),
        pci_bus=item.get("device_hex"),
        name=str(item.get("device_info", "")),
    )
