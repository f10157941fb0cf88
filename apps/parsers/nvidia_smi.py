"""nvidia-smi: --query-gpu CSV, -q text, -q -x XML, topo -m, nvlink -s, dmon, -L, --help-query-gpu, default table."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from typing import Any

from .common import (
    Result,
    clean,
    end_of_input,
    incomplete,
    is_missing,
    parse_id_list,
    require_content,
    shorten,
    split_lines,
    strip_ansi,
    to_bool,
    to_float,
    to_int,
    unexpected,
)
from .errors import ParseError

# The --query-gpu field list Rackpilot asks for; also the column order assumed for noheader CSV.
QUERY_GPU_FIELDS = (
    "index",
    "uuid",
    "name",
    "serial",
    "pci.bus_id",
    "driver_version",
    "vbios_version",
    "memory.total",
    "memory.used",
    "memory.free",
    "utilization.gpu",
    "utilization.memory",
    "temperature.gpu",
    "temperature.memory",
    "power.draw",
    "power.limit",
    "power.max_limit",
    "clocks.current.sm",
    "clocks.current.memory",
    "clocks.max.sm",
    "clocks.max.memory",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "ecc.errors.corrected.volatile.total",
    "ecc.errors.uncorrected.volatile.total",
    "ecc.mode.current",
    "persistence_mode",
    "compute_mode",
    "mig.mode.current",
    "fan.speed",
    "pstate",
    "clocks_event_reasons.active",
)

# Bits of nvmlClocksEventReasons (nvml.h), lowest first.
CLOCKS_EVENT_REASON_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}

# Names nvidia-smi -q / -q -x use for the same reasons, after key normalisation.
REASON_NAMES = {
    "idle": "gpu_idle",
    "gpu_idle": "gpu_idle",
    "display_clocks_setting": "display_clock_setting",
}


def decode_clocks_event_reasons(mask: int) -> list[str]:
    """Names of the bits set in a clocks-event-reasons mask, such as 0x4 → ['sw_power_cap']."""
    names = [name for bit, name in CLOCKS_EVENT_REASON_BITS.items() if mask & bit]
    unknown = mask & ~sum(CLOCKS_EVENT_REASON_BITS)
    if unknown:
        names.append(f"unknown_0x{unknown:x}")
    return names


@dataclass
class GpuInfo(Result):
    """One GPU as reported by --query-gpu, -q or -q -x; fields the input lacks stay None."""

    index: int | None = None
    uuid: str | None = None
    name: str | None = None
    serial: str | None = None
    pci_bus_id: str | None = None
    architecture: str | None = None
    driver_version: str | None = None
    vbios_version: str | None = None
    memory_total_mib: float | None = None
    memory_used_mib: float | None = None
    memory_free_mib: float | None = None
    memory_reserved_mib: float | None = None
    utilization_gpu_pct: float | None = None
    utilization_memory_pct: float | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    power_max_limit_w: float | None = None
    temperature_c: float | None = None
    memory_temperature_c: float | None = None
    clocks_sm_mhz: float | None = None
    clocks_mem_mhz: float | None = None
    clocks_max_sm_mhz: float | None = None
    clocks_max_mem_mhz: float | None = None
    clocks_event_reasons: list[str] | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    ecc_mode: str | None = None
    ecc_errors_corrected_volatile: int | None = None
    ecc_errors_uncorrected_volatile: int | None = None
    ecc_errors_corrected_aggregate: int | None = None
    ecc_errors_uncorrected_aggregate: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    persistence_mode: str | None = None
    compute_mode: str | None = None
    mig_mode: str | None = None
    fan_speed_pct: float | None = None
    pstate: str | None = None
    timestamp: str | None = None  # --query-gpu=timestamp,...: when this row was sampled (one row per GPU per sample)
    extra: dict[str, str | None] = field(default_factory=dict)


@dataclass
class GpuReport(Result):
    """GPUs from --query-gpu CSV, -q text or -q -x XML; ``source`` says which."""

    source: str
    gpus: list[GpuInfo]
    driver_version: str | None = None
    cuda_version: str | None = None
    timestamp: str | None = None
    attached_gpus: int | None = None
    samples: int | None = None  # distinct time stamps of a -l/-lms series; None when the query had no timestamp


# --- --query-gpu CSV -------------------------------------------------------------------------------------------

# Field spellings nvidia-smi accepts → the name it prints in the CSV header.
QUERY_FIELD_ALIASES = {
    "gpu_uuid": "uuid",
    "gpu_name": "name",
    "gpu_serial": "serial",
    "gpu_bus_id": "pci.bus_id",
    "clocks.sm": "clocks.current.sm",
    "clocks.mem": "clocks.current.memory",
    "clocks.gr": "clocks.current.graphics",
    "clocks.max.mem": "clocks.max.memory",
    "clocks.max.gr": "clocks.max.graphics",
    "pcie.link.gen.gpucurrent": "pcie.link.gen.current",
    "clocks_throttle_reasons.active": "clocks_event_reasons.active",
    "power.draw.average": "power.draw",
    "enforced.power.limit": "power.limit",
}

# CSV field → (GpuInfo attribute, converter).
QUERY_FIELD_MAP = {
    "timestamp": ("timestamp", clean),
    "index": ("index", to_int),
    "uuid": ("uuid", clean),
    "name": ("name", clean),
    "serial": ("serial", clean),
    "pci.bus_id": ("pci_bus_id", clean),
    "driver_version": ("driver_version", clean),
    "vbios_version": ("vbios_version", clean),
    "memory.total": ("memory_total_mib", to_float),
    "memory.used": ("memory_used_mib", to_float),
    "memory.free": ("memory_free_mib", to_float),
    "memory.reserved": ("memory_reserved_mib", to_float),
    "utilization.gpu": ("utilization_gpu_pct", to_float),
    "utilization.memory": ("utilization_memory_pct", to_float),
    "temperature.gpu": ("temperature_c", to_float),
    "temperature.memory": ("memory_temperature_c", to_float),
    "power.draw": ("power_draw_w", to_float),
    "power.limit": ("power_limit_w", to_float),
    "power.max_limit": ("power_max_limit_w", to_float),
    "clocks.current.sm": ("clocks_sm_mhz", to_float),
    "clocks.current.memory": ("clocks_mem_mhz", to_float),
    "clocks.max.sm": ("clocks_max_sm_mhz", to_float),
    "clocks.max.memory": ("clocks_max_mem_mhz", to_float),
    "pcie.link.gen.current": ("pcie_gen_current", to_int),
    "pcie.link.gen.max": ("pcie_gen_max", to_int),
    "pcie.link.width.current": ("pcie_width_current", to_int),
    "pcie.link.width.max": ("pcie_width_max", to_int),
    "ecc.errors.corrected.volatile.total": ("ecc_errors_corrected_volatile", to_int),
    "ecc.errors.uncorrected.volatile.total": ("ecc_errors_uncorrected_volatile", to_int),
    "ecc.errors.corrected.aggregate.total": ("ecc_errors_corrected_aggregate", to_int),
    "ecc.errors.uncorrected.aggregate.total": ("ecc_errors_uncorrected_aggregate", to_int),
    "ecc.mode.current": ("ecc_mode", clean),
    "retired_pages.pending": ("retired_pages_pending", to_bool),
    "persistence_mode": ("persistence_mode", clean),
    "compute_mode": ("compute_mode", clean),
    "mig.mode.current": ("mig_mode", clean),
    "fan.speed": ("fan_speed_pct", to_float),
    "pstate": ("pstate", clean),
}

QUERY_TIMESTAMP = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)?$")  # 2026/11/30 09:00:00.000
HEADER_CELL = re.compile(r"^[a-z][a-z0-9_.]*(?: \[[^\]]*\])?$")
REASON_FIELD_PREFIXES = ("clocks_event_reasons.", "clocks_throttle_reasons.")


def canonical_query_field(name: str) -> str:
    """'memory.total [MiB]' → 'memory.total'; aliases folded onto the printed name."""
    name = name.strip().split(" [", 1)[0].strip().lower()
    return QUERY_FIELD_ALIASES.get(name, name)


def _split_csv_line(line: str) -> list[str]:
    # nvidia-smi never quotes; GPU names contain no commas.
    return [cell.strip() for cell in line.split(",")]


def _looks_like_header(cells: list[str]) -> bool:
    return all(HEADER_CELL.match(cell) for cell in cells)


def parse_query_gpu(text: str, fields: list[str] | tuple[str, ...] | None = None) -> GpuReport:
    """--query-gpu=... --format=csv[,noheader][,nounits]; without a header ``fields`` (or QUERY_GPU_FIELDS) names the
    columns."""
    lines = require_content(text, "nvidia-smi --query-gpu CSV")
    rows = [(number, line) for number, line in enumerate(lines, start=1) if line.strip()]
    first_number, first_line = rows[0]
    first_cells = _split_csv_line(first_line)
    if _looks_like_header(first_cells):
        columns = [canonical_query_field(cell) for cell in first_cells]
        # a looped query (-l / -lms) may print its header again; those lines are not GPU rows
        rows = [(number, line) for number, line in rows[1:] if line.strip() != first_line.strip()]
    else:
        columns = [canonical_query_field(name) for name in (fields or QUERY_GPU_FIELDS)]
        stamped = QUERY_TIMESTAMP.match(first_cells[0]) and "timestamp" not in columns
        if stamped and len(first_cells) == len(columns) + 1:
            columns = ["timestamp", *columns]  # noheader with timestamp first, as --query-gpu=timestamp,... prints
    if len(columns) < 2:
        raise ParseError(
            f"expected a comma-separated --query-gpu header or row, got {shorten(first_line)}", first_number
        )
    if not rows:
        raise end_of_input(lines, "a GPU row after the --query-gpu header")
    gpus = [_gpu_from_csv_row(columns, _split_csv_line(line), number) for number, line in rows]
    stamps = list(dict.fromkeys(gpu.timestamp for gpu in gpus if gpu.timestamp))
    return GpuReport(
        source="query-gpu",
        gpus=gpus,
        driver_version=next((gpu.driver_version for gpu in gpus if gpu.driver_version), None),
        timestamp=stamps[0] if stamps else None,
        attached_gpus=len({gpu.index for gpu in gpus}) if stamps else len(gpus),
        samples=len(stamps) if stamps else None,
    )


def _gpu_from_csv_row(columns: list[str], cells: list[str], line_number: int) -> GpuInfo:
    if len(cells) != len(columns):
        raise ParseError(f"expected {len(columns)} comma-separated values, got {len(cells)}", line_number)
    gpu = GpuInfo()
    for column, cell in zip(columns, cells, strict=True):
        _apply_csv_cell(gpu, column, cell, line_number)
    return gpu


def _apply_csv_cell(gpu: GpuInfo, column: str, cell: str, line_number: int) -> None:
    if column in QUERY_FIELD_MAP:
        attribute, convert = QUERY_FIELD_MAP[column]
        setattr(gpu, attribute, convert(cell))
    elif column == "clocks_event_reasons.active":
        mask = to_int(cell)
        if mask is None and not is_missing(cell):
            raise ParseError(f"expected a hex bitmask for {column}, got {shorten(cell)}", line_number)
        gpu.clocks_event_reasons = decode_clocks_event_reasons(mask) if mask is not None else None
    elif column.startswith(REASON_FIELD_PREFIXES) and "counters" not in column:
        _apply_reason_column(gpu, column.split(".", 1)[1], cell)
    else:
        gpu.extra[column] = clean(cell)


def _apply_reason_column(gpu: GpuInfo, reason: str, cell: str) -> None:
    if reason == "supported":
        gpu.extra["clocks_event_reasons.supported"] = clean(cell)
        return
    reasons = gpu.clocks_event_reasons if gpu.clocks_event_reasons is not None else []
    if to_bool(cell) and reason not in reasons:
        reasons.append(reason)
    gpu.clocks_event_reasons = reasons


# --- -q text and -q -x XML, read into one tree -----------------------------------------------------------------


@dataclass
class _Node:
    """A section of nvidia-smi -q (text or XML): an optional value and ordered children."""

    value: str | None = None
    children: list[tuple[str, _Node]] = field(default_factory=list)
    line: int | None = None  # 1-based, where a -q text section starts

    def child(self, *names: str) -> _Node | None:
        wanted = [normalise_key(name) for name in names]
        for name in wanted:
            for key, node in self.children:
                if key == name:
                    return node
        return None

    def find(self, *path: str | tuple[str, ...]) -> _Node | None:
        node: _Node | None = self
        for step in path:
            alternatives = step if isinstance(step, tuple) else (step,)
            node = node.child(*alternatives) if node else None
        return node

    def text(self, *path: str | tuple[str, ...]) -> str | None:
        node = self.find(*path)
        return clean(node.value) if node else None


def normalise_key(key: str) -> str:
    """'GPU Power Readings' and 'gpu_power_readings' both become 'gpu_power_readings'."""
    return re.sub(r"[\s\-/.]+", "_", key.strip().lower()).strip("_")


Q_LINE = re.compile(r"^(?P<indent> *)(?P<key>\S.*?)\s+:(?: (?P<value>.*))?$")
GPU_SECTION = re.compile(r"^GPU ([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f]+)$")
ELISION = {"...", "[...]"}


def _tree_from_text(lines: list[str]) -> _Node:
    root = _Node()
    stack: list[tuple[int, _Node]] = [(-1, root)]
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped or stripped in ELISION or stripped.startswith("====="):
            continue
        indent = len(line) - len(line.lstrip(" "))
        match = Q_LINE.match(line.rstrip())
        key, value = (match["key"], match["value"]) if match else (stripped, None)
        while stack[-1][0] >= indent:
            stack.pop()
        node = _Node(value=value.strip() if value is not None else None, line=number)
        if gpu := GPU_SECTION.match(key):
            node.value = gpu[1]  # a GPU section's value is its PCI bus id
            key = "gpu"
        stack[-1][1].children.append((normalise_key(key), node))
        stack.append((indent, node))
    return root


def parse_query_text(text: str, *, selected: bool = False) -> GpuReport:
    """nvidia-smi -q (any -d selection). 'Attached GPUs' counts every GPU, so output with fewer GPU sections is
    incomplete unless the command chose GPUs with -i (``selected``)."""
    lines = require_content(text, "nvidia-smi -q output")
    has_banner = any("NVSMI LOG" in line for line in lines)
    root = _tree_from_text(lines)
    gpu_nodes = [node for key, node in root.children if key == "gpu"]
    if not has_banner and not gpu_nodes:
        raise unexpected(lines, "nvidia-smi -q output ('==============NVSMI LOG==============' or 'GPU <bus id>')")
    if not gpu_nodes:
        raise end_of_input(lines, "a 'GPU <bus id>' section")
    report = _report_from_tree(root, gpu_nodes, source="q")
    _require_every_gpu(lines, root, report, selected)
    _require_whole_last_section(lines, gpu_nodes, report)
    return report


def _require_every_gpu(lines: list[str], root: _Node, report: GpuReport, selected: bool) -> None:
    if selected or report.attached_gpus is None or len(report.gpus) >= report.attached_gpus:
        return
    declared = root.find("attached_gpus")
    where = f" (line {declared.line})" if declared is not None and declared.line else ""
    raise incomplete(
        lines,
        f"'Attached GPUs : {report.attached_gpus}'{where} declares that many GPUs, the output holds a "
        f"section for {len(report.gpus)} of them",
        report,
    )


def _require_whole_last_section(lines: list[str], gpu_nodes: list[_Node], report: GpuReport) -> None:
    """Every GPU section of one run lists the same entries; a last section that stops early was cut inside it."""
    first, last = gpu_nodes[0], gpu_nodes[-1]
    expected = [key for key, _ in first.children]
    held = [key for key, _ in last.children]
    if len(gpu_nodes) < 2 or len(held) >= len(expected) or held != expected[: len(held)]:
        return
    raise incomplete(
        lines,
        f"the section 'GPU {last.value}' (line {last.line}) stops after {len(held)} of the {len(expected)} entries "
        f"that 'GPU {first.value}' (line {first.line}) holds; '{expected[len(held)]}' and after are missing",
        report,
    )


def parse_query_xml(text: str, *, selected: bool = False) -> GpuReport:
    """nvidia-smi -q -x; fewer <gpu> elements than <attached_gpus> is incomplete unless -i chose them."""
    lines = require_content(text, "nvidia-smi -q -x XML")
    leading_lines = text[: len(text) - len(text.lstrip())].count("\n")
    try:
        element = ElementTree.fromstring(text.strip())
    except ElementTree.ParseError as exc:
        raise ParseError(f"expected nvidia-smi -q -x XML: {exc}", line=leading_lines + exc.position[0]) from None
    if element.tag != "nvidia_smi_log":
        raise unexpected(lines, "an <nvidia_smi_log> XML document")
    root = _tree_from_xml(element)
    gpu_nodes = [node for key, node in root.children if key == "gpu"]
    if not gpu_nodes:
        raise end_of_input(lines, "a <gpu> element")
    report = _report_from_tree(root, gpu_nodes, source="xml")
    if not selected and report.attached_gpus is not None and len(report.gpus) < report.attached_gpus:
        raise incomplete(
            lines,
            f"<attached_gpus>{report.attached_gpus}</attached_gpus> declares that many GPUs, the "
            f"document holds a <gpu> element for {len(report.gpus)} of them",
            report,
        )
    return report


def _tree_from_xml(element: ElementTree.Element) -> _Node:
    text = (element.text or "").strip()
    node = _Node(value=text or None)
    if element.tag == "gpu" and element.get("id"):
        node.value = element.get("id")
    for child in element:
        node.children.append((normalise_key(child.tag), _tree_from_xml(child)))
    return node


def _report_from_tree(root: _Node, gpu_nodes: list[_Node], source: str) -> GpuReport:
    driver = root.text("driver_version")
    gpus = [_gpu_from_tree(node, index, driver) for index, node in enumerate(gpu_nodes)]
    return GpuReport(
        source=source,
        gpus=gpus,
        driver_version=driver,
        cuda_version=root.text("cuda_version"),
        timestamp=root.text("timestamp"),
        attached_gpus=to_int(root.text("attached_gpus")),
    )


POWER_SECTIONS = ("gpu_power_readings", "power_readings")


def _gpu_from_tree(node: _Node, index: int, driver: str | None) -> GpuInfo:
    # -q prints no index; GPUs appear in index order, so position is the index (-i N prints only N).
    return GpuInfo(
        index=index,
        uuid=node.text(("gpu_uuid", "uuid")),
        name=node.text("product_name"),
        serial=node.text(("serial_number", "serial")),
        pci_bus_id=node.text("pci", "bus_id") or node.text("pci", "pci_bus_id") or node.value,
        architecture=node.text("product_architecture"),
        driver_version=driver,
        vbios_version=node.text("vbios_version"),
        memory_total_mib=to_float(node.text("fb_memory_usage", "total")),
        memory_used_mib=to_float(node.text("fb_memory_usage", "used")),
        memory_free_mib=to_float(node.text("fb_memory_usage", "free")),
        memory_reserved_mib=to_float(node.text("fb_memory_usage", "reserved")),
        utilization_gpu_pct=to_float(node.text("utilization", ("gpu", "gpu_util"))),
        utilization_memory_pct=to_float(node.text("utilization", ("memory", "memory_util"))),
        power_draw_w=to_float(
            node.text(
                POWER_SECTIONS, ("average_power_draw", "power_draw", "instantaneous_power_draw", "instant_power_draw")
            )
        ),
        power_limit_w=to_float(
            node.text(POWER_SECTIONS, ("current_power_limit", "enforced_power_limit", "power_limit"))
        ),
        power_max_limit_w=to_float(node.text(POWER_SECTIONS, "max_power_limit")),
        temperature_c=to_float(node.text("temperature", ("gpu_current_temp", "gpu_temp"))),
        memory_temperature_c=to_float(node.text("temperature", ("memory_current_temp", "memory_temp"))),
        clocks_sm_mhz=to_float(node.text("clocks", ("sm", "sm_clock"))),
        clocks_mem_mhz=to_float(node.text("clocks", ("memory", "mem_clock"))),
        clocks_max_sm_mhz=to_float(node.text("max_clocks", ("sm", "sm_clock"))),
        clocks_max_mem_mhz=to_float(node.text("max_clocks", ("memory", "mem_clock"))),
        clocks_event_reasons=_reasons_from_tree(node.find(("clocks_event_reasons", "clocks_throttle_reasons"))),
        pcie_gen_current=to_int(_link_info(node, "current", ("pcie_generation", "pcie_gen"), "current_link_gen")),
        pcie_gen_max=to_int(_link_info(node, "max", ("pcie_generation", "pcie_gen"), "max_link_gen")),
        pcie_width_current=to_int(_link_info(node, "current", ("link_width", "link_widths"), "current_link_width")),
        pcie_width_max=to_int(_link_info(node, "max", ("link_width", "link_widths"), "max_link_width")),
        ecc_mode=node.text("ecc_mode", ("current", "current_ecc")),
        **_ecc_counts(node.find("ecc_errors")),
        retired_pages_pending=to_bool(
            node.text("retired_pages", ("pending_page_blacklist", "pending_blacklist", "pending_retirement"))
        ),
        remapped_rows_correctable=to_int(node.text("remapped_rows", ("correctable_error", "remapped_row_corr"))),
        remapped_rows_uncorrectable=to_int(node.text("remapped_rows", ("uncorrectable_error", "remapped_row_unc"))),
        remapped_rows_pending=to_bool(node.text("remapped_rows", ("pending", "remapped_row_pending"))),
        remapped_rows_failure=to_bool(
            node.text("remapped_rows", ("remapping_failure_occurred", "remapped_row_failure"))
        ),
        persistence_mode=node.text("persistence_mode"),
        compute_mode=node.text("compute_mode"),
        mig_mode=node.text("mig_mode", ("current", "current_mig")),
        fan_speed_pct=to_float(node.text("fan_speed")),
        pstate=node.text("performance_state"),
    )


def _link_info(node: _Node, text_key: str, section: tuple[str, ...], xml_key: str) -> str | None:
    link = node.find("pci", ("gpu_link_info", "pci_gpu_link_info"), section)
    if link is None:
        return None
    return link.text((text_key, xml_key))


def _reasons_from_tree(section: _Node | None) -> list[str] | None:
    if section is None:
        return None
    active: list[str] = []
    pending = list(section.children)
    while pending:
        key, child = pending.pop(0)
        pending[:0] = child.children  # HW Slowdown nests its thermal and power-brake variants
        name = re.sub(r"^clocks_(?:event|throttle)_reason_", "", key)
        name = REASON_NAMES.get(name, name)
        if (child.value or "").strip().lower() == "active":
            active.append(name)
    return active


def _ecc_counts(section: _Node | None) -> dict[str, int | None]:
    counts: dict[str, int | None] = {}
    for scope in ("volatile", "aggregate"):
        node = section.find(scope) if section else None
        corrected, uncorrected = _sum_ecc(node)
        counts[f"ecc_errors_corrected_{scope}"] = corrected
        counts[f"ecc_errors_uncorrected_{scope}"] = uncorrected
    return counts


def _sum_ecc(node: _Node | None) -> tuple[int | None, int | None]:
    if node is None:
        return None, None
    single = node.find("single_bit", "total")
    if single is not None:  # drivers before R450 split counts by bit width
        return to_int(single.value), to_int(node.text("double_bit", "total"))
    corrected: list[int] = []
    uncorrected: list[int] = []
    for key, child in node.children:
        value = to_int(child.value)
        if value is None:
            continue
        if "uncorrectable" in key:
            uncorrected.append(value)
        elif "correctable" in key:
            corrected.append(value)
    return (sum(corrected) if corrected else None), (sum(uncorrected) if uncorrected else None)


# --- topo -m ----------------------------------------------------------------------------------------------------


@dataclass
class TopoDevice(Result):
    """A row of the topology matrix: its links to every column device, and CPU/NUMA affinity for GPUs."""

    name: str
    kind: str
    links: dict[str, str]
    nic_device: str | None = None
    cpu_affinity: str | None = None
    cpus: list[int] | None = None
    numa_affinity: int | None = None  # the one NUMA node, or None when the GPU is near several (see numa_nodes)
    numa_nodes: list[int] | None = None  # every node of the NUMA Affinity column, such as '0,3-9,11-17'
    gpu_numa_id: int | None = None
    nvlink_peers: dict[str, int] = field(default_factory=dict)


@dataclass
class Topology(Result):
    columns: list[str]
    gpus: list[TopoDevice]
    nics: list[TopoDevice]
    legend: dict[str, str]


NV_LINK = re.compile(r"^NV(\d+)$")
LEGEND_ENTRY = re.compile(r"^\s+(\S+)\s+=\s+(.+)$")
NIC_LEGEND_ENTRY = re.compile(r"^\s+(NIC\d+):\s+(\S+)$")
# The cells of `topo -p2p <r|w|n|a|p>`: a peer-to-peer capability status, not a connection type.
P2P_STATUS = {"OK", "CNS", "GNS", "TNS", "NS", "DR", "U"}


def _matrix_header(lines: list[str], what: str) -> tuple[int, list[str]]:
    """The index of the row of device names that heads a topo matrix, and its cells."""
    index = next((i for i, line in enumerate(lines) if line.split()[:1] == ["GPU0"]), None)
    if index is None:
        raise unexpected(lines, f"the {what} header row starting with 'GPU0'")
    return index, [cell for cell in re.split(r"\t+|\s{2,}", lines[index].strip()) if cell]


def parse_topology(text: str) -> Topology:
    """nvidia-smi topo -m; the legend is read only for NIC names. A `topo -p2p` status matrix is refused (read it
    with parse_p2p), and a matrix that lacks a row its header announces is incomplete."""
    lines = [strip_ansi(line) for line in require_content(text, "nvidia-smi topo -m output")]
    header_index, header = _matrix_header(lines, "nvidia-smi topo -m")
    device_count = next((i for i, cell in enumerate(header) if " " in cell), len(header))
    columns, extra_columns = header[:device_count], header[device_count:]
    rows: list[TopoDevice] = []
    legend: dict[str, str] = {}
    nic_names: dict[str, str] = {}
    for number, line in enumerate(lines[header_index + 1 :], start=header_index + 2):
        tokens = line.split()
        if tokens and tokens[0] in columns:
            _refuse_p2p_row(tokens, columns, number)
            rows.append(_topo_row(tokens, columns, extra_columns, number))
        elif match := NIC_LEGEND_ENTRY.match(line):
            nic_names[match[1]] = match[2]
        elif match := LEGEND_ENTRY.match(line):
            legend[match[1]] = match[2].strip()
    if not rows:
        raise end_of_input(lines, "topology rows ('GPU0  X  ...') after the header")
    for row in rows:
        row.nic_device = nic_names.get(row.name, row.nic_device)
    topology = Topology(
        columns=columns,
        gpus=[row for row in rows if row.kind == "gpu"],
        nics=[row for row in rows if row.kind == "nic"],
        legend=legend,
    )
    _require_every_row(lines, header_index, columns, [row.name for row in rows], topology)
    return topology


def _refuse_p2p_row(tokens: list[str], columns: list[str], number: int) -> None:
    links = tokens[1 : len(columns) + 1]
    if links and all(cell in P2P_STATUS or cell == "X" for cell in links) and set(links) & P2P_STATUS:
        raise ParseError(
            f"this is `nvidia-smi topo -p2p` output (peer-to-peer status such as OK/CNS), not `topo -m` "
            f"connection types; got {shorten(' '.join(tokens))}",
            number,
        )


def _require_every_row(lines: list[str], header_index: int, columns: list[str], held: list[str], partial) -> None:
    missing = [name for name in columns if name not in held]
    if missing:
        raise incomplete(
            lines,
            f"the header (line {header_index + 1}) announces {len(columns)} devices, the matrix has no row for "
            f"{', '.join(missing)}",
            partial,
        )


def _topo_row(tokens: list[str], columns: list[str], extra_columns: list[str], number: int) -> TopoDevice:
    name, values = tokens[0], tokens[1:]
    if len(values) < len(columns):
        raise ParseError(f"expected {len(columns)} link columns for {name}, got {len(values)}", number)
    links = dict(zip(columns, values[: len(columns)], strict=True))
    extras = dict(zip(extra_columns, values[len(columns) :], strict=False))
    kind = "gpu" if name.startswith("GPU") else "nic"
    cpu_affinity = clean(extras.get("CPU Affinity"))
    numa_nodes = parse_id_list(extras.get("NUMA Affinity"))
    return TopoDevice(
        name=name,
        kind=kind,
        links=links,
        nic_device=None if kind == "gpu" or name.startswith("NIC") else name,
        cpu_affinity=cpu_affinity,
        cpus=parse_id_list(cpu_affinity),
        numa_affinity=numa_nodes[0] if numa_nodes and len(numa_nodes) == 1 else None,
        numa_nodes=numa_nodes,
        gpu_numa_id=to_int(extras.get("GPU NUMA ID")),
        nvlink_peers={peer: int(m[1]) for peer, link in links.items() if (m := NV_LINK.match(link))},
    )


# --- topo -p2p -------------------------------------------------------------------------------------------------


@dataclass
class P2pMatrix(Result):
    """nvidia-smi topo -p2p <r|w|n|a|p>: each GPU's peer-to-peer status with every other (OK, CNS, GNS, TNS, NS, DR,
    U); ``legend`` spells the codes when the output printed it."""

    gpus: list[str]
    status: dict[str, dict[str, str]]
    legend: dict[str, str]

    def pairs_not_ok(self) -> list[tuple[str, str, str]]:
        return [
            (gpu, peer, code)
            for gpu, row in self.status.items()
            for peer, code in row.items()
            if code not in ("X", "OK")
        ]


def parse_p2p(text: str) -> P2pMatrix:
    lines = [strip_ansi(line) for line in require_content(text, "nvidia-smi topo -p2p output")]
    header_index, columns = _matrix_header(lines, "nvidia-smi topo -p2p")
    status: dict[str, dict[str, str]] = {}
    legend: dict[str, str] = {}
    for number, line in enumerate(lines[header_index + 1 :], start=header_index + 2):
        tokens = line.split()
        if tokens and tokens[0] in columns:
            cells = tokens[1:]
            if len(cells) != len(columns) or not set(cells) <= P2P_STATUS | {"X"}:
                raise ParseError(
                    f"expected {len(columns)} peer-to-peer status codes (X, OK, CNS, GNS, TNS, NS, DR, U) for "
                    f"{tokens[0]}, got {shorten(' '.join(cells))}",
                    number,
                )
            status[tokens[0]] = dict(zip(columns, cells, strict=True))
        elif match := LEGEND_ENTRY.match(line):
            legend[match[1]] = match[2].strip()
    if not status:
        raise end_of_input(lines, "status rows ('GPU0  X  OK ...') after the header")
    matrix = P2pMatrix(gpus=columns, status=status, legend=legend)
    _require_every_row(lines, header_index, columns, list(status), matrix)
    return matrix


# --- nvlink -s --------------------------------------------------------------------------------------------------


@dataclass
class NvlinkLink(Result):
    link: int
    active: bool
    speed_gbps: float | None


@dataclass
class NvlinkGpu(Result):
    index: int
    name: str
    uuid: str | None
    links: list[NvlinkLink]

    @property
    def active_links(self) -> int:
        return sum(link.active for link in self.links)


@dataclass
class NvlinkStatus(Result):
    """Per-GPU NVLink state; an empty list means the machine reported no NVLinks at all."""

    gpus: list[NvlinkGpu]


GPU_TITLE = re.compile(r"^GPU (\d+): (.+?)(?: \(UUID: (\S+)\))?\s*$")
LINK_LINE = re.compile(r"^\s*Link (\d+): (.+?)\s*$")


def parse_nvlink_status(text: str) -> NvlinkStatus:
    """nvidia-smi nvlink -s / --status. Empty output (no NVLink on this machine) is a valid, empty result."""
    gpus: list[NvlinkGpu] = []
    for number, line in enumerate(split_lines(text), start=1):
        stripped = line.strip()
        if not stripped or stripped in ELISION:
            continue
        if match := GPU_TITLE.match(stripped):
            gpus.append(NvlinkGpu(index=int(match[1]), name=match[2], uuid=match[3], links=[]))
        elif (match := LINK_LINE.match(line)) and gpus:
            gpus[-1].links.append(_nvlink_link(int(match[1]), match[2]))
        else:
            raise ParseError(f"expected 'GPU N: <name>' or 'Link N: <speed>', got {shorten(line)}", number)
    return NvlinkStatus(gpus=gpus)


def _nvlink_link(link: int, state: str) -> NvlinkLink:
    if "inactive" in state.lower():
        return NvlinkLink(link=link, active=False, speed_gbps=None)
    speed = to_float(state)
    return NvlinkLink(link=link, active=speed is not None and speed > 0, speed_gbps=speed)


# --- dmon -------------------------------------------------------------------------------------------------------


@dataclass
class DmonSample(Result):
    gpu: int | None
    values: dict[str, Any]


@dataclass
class Dmon(Result):
    """nvidia-smi dmon with any -s selection: column names, their units, one sample per GPU per interval."""

    columns: list[str]
    units: dict[str, str]
    samples: list[DmonSample]


def parse_dmon(text: str) -> Dmon:
    lines = require_content(text, "nvidia-smi dmon output")
    columns: list[str] = []
    units: dict[str, str] = {}
    samples: list[DmonSample] = []
    expect_units = False
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            tokens = stripped.lstrip("#").split()
            if expect_units and len(tokens) == len(columns):
                units = dict(zip(columns, tokens, strict=True))
            elif "gpu" in tokens:
                columns = tokens
            expect_units = "gpu" in tokens
            continue
        expect_units = False
        if not columns:
            raise ParseError(f"expected the dmon header '# gpu ...', got {shorten(line)}", number)
        samples.append(_dmon_sample(columns, stripped.split(), number))
    if not columns:
        raise unexpected(lines, "the dmon header '# gpu ...'")
    if not samples:
        raise end_of_input(lines, "dmon samples after the header")
    return Dmon(columns=columns, units=units, samples=samples)


def _dmon_sample(columns: list[str], tokens: list[str], number: int) -> DmonSample:
    if len(tokens) != len(columns):
        raise ParseError(f"expected {len(columns)} dmon columns, got {len(tokens)}", number)
    values: dict[str, Any] = {}
    for column, token in zip(columns, tokens, strict=True):
        number_value = to_float(token) if re.fullmatch(r"-?\d+(\.\d+)?", token) else None
        values[column] = number_value if number_value is not None else clean(token)
    gpu = values.pop("gpu", None)
    return DmonSample(gpu=int(gpu) if isinstance(gpu, float) else None, values=values)


# --- default table ----------------------------------------------------------------------------------------------


@dataclass
class TableGpu(Result):
    index: int
    name: str
    persistence_mode: str | None = None
    bus_id: str | None = None
    display_active: str | None = None
    ecc_uncorrected: int | None = None
    fan_pct: float | None = None
    temperature_c: float | None = None
    pstate: str | None = None
    power_draw_w: float | None = None
    power_cap_w: float | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    utilization_gpu_pct: float | None = None
    compute_mode: str | None = None
    mig_mode: str | None = None


@dataclass
class TableProcess(Result):
    gpu: int
    gi: str | None
    ci: str | None
    pid: int
    type: str
    name: str
    memory_mib: float | None


@dataclass
class SmiTable(Result):
    """The plain `nvidia-smi` summary table."""

    smi_version: str | None
    driver_version: str | None
    cuda_version: str | None
    timestamp: str | None
    gpus: list[TableGpu]
    processes: list[TableProcess]


TABLE_VERSION = re.compile(r"NVIDIA-SMI\s+(\S+)\s+Driver Version:\s+(\S+)(?:\s+CUDA Version:\s+(\S+))?")
TABLE_GPU_FIRST = re.compile(r"^\s*(\d+)\s+(.+?)\s+(On|Off)\s*$")
TABLE_GPU_SECOND = re.compile(r"^\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*/\s*(\S+)\s*$")
TABLE_PROCESSES_TITLE = re.compile(r"^\|\s*Processes:\s")
TABLE_PROCESS = re.compile(r"^\|\s+(\d+)\s+(\S+)\s+(\S+)\s+(\d+)\s+(\S+)\s+(.+?)\s+(\d+MiB|N/A)\s*\|$")


def parse_smi_table(text: str) -> SmiTable:
    """The plain `nvidia-smi` table. Each GPU has a block of rows and the Processes box closes the table; output
    that stops before either, or lists processes on a GPU that has no row, is incomplete."""
    lines = require_content(text, "the nvidia-smi summary table")
    version_index = next((i for i, line in enumerate(lines) if TABLE_VERSION.search(line)), None)
    if version_index is None:
        raise unexpected(lines, "the nvidia-smi table header '| NVIDIA-SMI ... Driver Version: ...'")
    version = TABLE_VERSION.search(lines[version_index])
    first_line = next(line.strip() for line in lines if line.strip())
    timestamp = first_line if not first_line.startswith(("+", "|")) else None
    gpus: list[TableGpu] = []
    processes: list[TableProcess] = []
    process_lines: list[int] = []
    cut_gpu: tuple[int, int] | None = None  # (index, line) of a GPU whose block stops after its first row
    processes_box: int | None = None
    for index in range(version_index + 1, len(lines)):
        cells = _table_cells(lines[index])
        if len(cells) == 3 and (match := TABLE_GPU_FIRST.match(cells[0])):
            gpus.append(_table_gpu(match, cells, lines[index + 1 : index + 3]))
            if len(_table_cells(lines[index + 1]) if index + 1 < len(lines) else []) != 3:
                cut_gpu = (gpus[-1].index, index + 1)
        elif match := TABLE_PROCESS.match(lines[index].rstrip()):
            processes.append(_table_process(match))
            process_lines.append(index + 1)
        elif TABLE_PROCESSES_TITLE.match(lines[index]):
            processes_box = index + 1
    if not gpus:
        raise end_of_input(lines, "a GPU row ('|   0  <name>  On/Off | <bus id> ...') in the table")
    table = SmiTable(
        smi_version=version[1],
        driver_version=version[2],
        cuda_version=version[3],
        timestamp=timestamp,
        gpus=gpus,
        processes=processes,
    )
    _require_whole_table(lines, table, cut_gpu, processes_box, process_lines)
    return table


def _require_whole_table(
    lines: list[str],
    table: SmiTable,
    cut_gpu: tuple[int, int] | None,
    processes_box: int | None,
    process_lines: list[int],
) -> None:
    if cut_gpu is not None:
        raise incomplete(lines, f"the block of GPU {cut_gpu[0]} (line {cut_gpu[1]}) stops after its first row", table)
    if processes_box is None:
        raise incomplete(
            lines,
            f"the table stops after GPU {table.gpus[-1].index} without its Processes box; GPU rows after it may be "
            "missing",
            table,
        )
    rows = {gpu.index for gpu in table.gpus}
    for process, number in zip(table.processes, process_lines, strict=True):
        if process.gpu not in rows:
            raise incomplete(
                lines,
                f"process {process.pid} runs on GPU {process.gpu} (line {number}), and the table has no row for "
                f"GPU {process.gpu}",
                table,
                line=number,
            )


def _table_cells(line: str) -> list[str]:
    line = line.rstrip()
    if not (line.startswith("|") and line.endswith("|")):
        return []
    return line[1:-1].split("|")


def _table_gpu(first: re.Match, cells: list[str], following: list[str]) -> TableGpu:
    bus = cells[1].split()
    gpu = TableGpu(
        index=int(first[1]),
        name=first[2],
        persistence_mode=first[3],
        bus_id=bus[0] if bus else None,
        display_active=bus[1] if len(bus) > 1 else None,
        ecc_uncorrected=to_int(cells[2].strip()),
    )
    second = _table_cells(following[0]) if following else []
    if len(second) == 3:
        _apply_table_second_line(gpu, second)
    third = _table_cells(following[1]) if len(following) > 1 else []
    if len(third) == 3 and not third[0].strip() and third[2].strip():
        gpu.mig_mode = clean(third[2])
    return gpu


def _apply_table_second_line(gpu: TableGpu, cells: list[str]) -> None:
    if match := TABLE_GPU_SECOND.match(cells[0]):
        gpu.fan_pct = to_float(match[1])
        gpu.temperature_c = to_float(match[2])
        gpu.pstate = clean(match[3])
        gpu.power_draw_w = to_float(match[4])
        gpu.power_cap_w = to_float(match[5])
    memory = cells[1].split("/")
    if len(memory) == 2:
        gpu.memory_used_mib = to_float(memory[0])
        gpu.memory_total_mib = to_float(memory[1])
    usage = cells[2].split()
    if usage:
        gpu.utilization_gpu_pct = to_float(usage[0])
        gpu.compute_mode = " ".join(usage[1:]) or None


def _table_process(match: re.Match) -> TableProcess:
    return TableProcess(
        gpu=int(match[1]),
        gi=clean(match[2]),
        ci=clean(match[3]),
        pid=int(match[4]),
        type=match[5],
        name=match[6],
        memory_mib=to_float(match[7]),
    )


# --- -L ---------------------------------------------------------------------------------------------------------


@dataclass
class ListedGpu(Result):
    index: int
    name: str
    uuid: str | None
    mig_devices: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class GpuList(Result):
    gpus: list[ListedGpu]


MIG_LINE = re.compile(r"^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: (\S+)\)\s*$")


def parse_gpu_list(text: str) -> GpuList:
    """nvidia-smi -L, with MIG devices under their GPU."""
    lines = require_content(text, "nvidia-smi -L output")
    gpus: list[ListedGpu] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if match := GPU_TITLE.match(line.strip()):
            gpus.append(ListedGpu(index=int(match[1]), name=match[2], uuid=match[3]))
        elif (match := MIG_LINE.match(line)) and gpus:
            gpus[-1].mig_devices.append({"profile": match[1], "device": int(match[2]), "uuid": match[3]})
        else:
            raise ParseError(f"expected 'GPU N: <name> (UUID: ...)', got {shorten(line)}", number)
    return GpuList(gpus=gpus)


# --- --help-query-gpu -------------------------------------------------------------------------------------------


@dataclass
class QueryField(Result):
    names: list[str]
    description: str
    section: str | None


@dataclass
class QueryFieldHelp(Result):
    """Every field --query-gpu accepts on this driver (nvidia-smi --help-query-gpu)."""

    fields: list[QueryField]

    def names(self) -> set[str]:
        return {name for item in self.fields for name in item.names}


QUOTED_NAME = re.compile(r'"([^"]+)"')
FIELD_NAMES_LINE = re.compile(r'^"[A-Za-z][\w.]*"(?: or "[A-Za-z][\w.]*")*$')
SECTION_TITLE = re.compile(r"^Section about (\S+) properties")


def parse_help_query_gpu(text: str) -> QueryFieldHelp:
    lines = require_content(text, "nvidia-smi --help-query-gpu output")
    fields: list[QueryField] = []
    section: str | None = None
    current: QueryField | None = None
    for line in lines:
        stripped = line.strip()
        if not stripped:
            current = None
        elif match := SECTION_TITLE.match(stripped):
            section, current = match[1], None
        elif FIELD_NAMES_LINE.match(stripped):
            current = QueryField(names=QUOTED_NAME.findall(stripped), description="", section=section)
            fields.append(current)
        elif current is not None:
            current.description = f"{current.description} {stripped}".strip()
    if not fields:
        raise unexpected(lines, "the --help-query-gpu field list (lines such as '\"memory.total\"')")
    return QueryFieldHelp(fields=fields)
