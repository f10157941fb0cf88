"""Import and export of the whole inventory: one JSON or YAML document, or the nodes alone as CSV.

Objects name each other by natural keys, never database ids, so a document moves between installations and reads
well in review: a site is its slug, a rack its site's slug and its name, a tag its slug, a GPU SKU its name, a node
its host name, a GPU its node and index, a NIC its node and name, a switch its name, a storage tier its site and
name, a cable end `{node, nic}` or `{switch, port}`. A NIC's peer GPUs are indexes on its own node (or
`{node, index}` for another node's).

An import creates or updates objects by natural key (a field left out of a row keeps its value, or takes the model's
default on create) and leaves alone what the file does not mention. It is all or nothing. Inside one transaction,
each row is checked as full_clean() checks it (each field, the model's clean(), uniqueness; Meta.constraints by the
database as the row is saved in a savepoint), against the database with the file's earlier rows applied. Every
problem is collected; if there is any, the transaction rolls back and ImportRejected lists them all. Rows are saved
one by one, so each create and update lands in the audit log with source "import". Sections are read in document
order, which is the order their references need; a row that only repeats what is stored is left untouched.
"""

import bisect
import csv
import io
import json
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from functools import cached_property, lru_cache
from json.decoder import JSONObject
from json.scanner import py_make_scanner
from operator import itemgetter
from pathlib import PurePath
from typing import Any

import yaml
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import DatabaseError, models, transaction

from apps.core.audit import audit_context
from apps.core.choices import ChangeSource
from apps.inventory.hostkeys import fingerprint_of
from apps.inventory.models import (
    Cable,
    Firmware,
    Gpu,
    GpuSku,
    Nic,
    Node,
    Rack,
    Site,
    SshHostKey,
    StorageTier,
    Switch,
    Tag,
    Volume,
)

DOCUMENT_VERSION = 1
DOCUMENT_FORMATS = ("json", "yaml")
IMPORT_FORMATS = ("json", "yaml", "csv")
NODE_CSV_COLUMNS = (
    "hostname", "role", "status", "site", "rack", "u_position", "u_height", "management_ip", "bmc_address", "gpu_sku",
    "expected_gpu_count", "cpu_model", "cpu_sockets", "cpu_cores", "memory_gib", "numa_nodes", "tags",
)  # fmt: skip
CSV_TAG_SEPARATOR = ";"

_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_EXTENSIONS = {".json": "json", ".yaml": "yaml", ".yml": "yaml", ".csv": "csv"}


# --- What callers get back ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportProblem:
    """One thing wrong with an import. `line` is the source line (CSV header = 1) where known; `item` is the
    1-based position of the row within its section."""

    section: str
    line: int | None
    field: str | None
    message: str
    item: int | None = None

    @property
    def location(self) -> str:
        """Where to look: `12` (a line), `nodes[3]` (an item of a JSON document read without lines), or ``."""
        if self.line is not None:
            return str(self.line)
        return f"{self.section}[{self.item}]" if self.item is not None else ""

    def as_dict(self) -> dict:
        return {"section": self.section, "line": self.line, "field": self.field, "message": self.message}


class ImportRejected(Exception):
    """The import changed nothing; `problems` lists everything wrong with the file, in file order."""

    def __init__(self, problems: list[ImportProblem]):
        self.problems = list(problems)
        count = len(self.problems)
        super().__init__(f"{count} problem{'s' if count != 1 else ''}; nothing was imported")


@dataclass
class SectionCounts:
    created: int = 0
    updated: int = 0
    unchanged: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"created": self.created, "updated": self.updated, "unchanged": self.unchanged}


@dataclass
class ImportResult:
    """How many objects of each section the import created, updated, or found already as the file has them."""

    sections: dict[str, SectionCounts] = field(default_factory=dict)
    dry_run: bool = False

    @property
    def totals(self) -> SectionCounts:
        return SectionCounts(
            created=sum(c.created for c in self.sections.values()),
            updated=sum(c.updated for c in self.sections.values()),
            unchanged=sum(c.unchanged for c in self.sections.values()),
        )

    def as_dict(self) -> dict:
        return {
            "dry_run": self.dry_run,
            "sections": {name: counts.as_dict() for name, counts in self.sections.items()},
            "totals": self.totals.as_dict(),
        }


def guess_format(filename: str) -> str | None:
    """The import format a file name implies (`racks.yml` -> "yaml"), or None."""
    return _EXTENSIONS.get(PurePath(filename).suffix.lower())


# --- The document's sections ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Ref:
    """A document field naming another object by its natural key: `target` section, model `attr`, values() paths."""

    target: str
    attr: str
    paths: tuple[str, ...]


@dataclass(frozen=True)
class _Section:
    """One list of the document: its model, the fields naming each object (`key`), and all its fields."""

    name: str
    model: type[models.Model]
    key: tuple[str, ...]
    columns: tuple[str, ...]
    refs: dict[str, _Ref] = field(default_factory=dict)
    related: tuple[str, ...] = ()  # loaded with existing objects, for clean() and __str__()

    @cached_property
    def plain(self) -> list[str]:
        return [name for name in self.columns if name not in self.refs and name not in _SPECIAL_COLUMNS]

    @cached_property
    def attnames(self) -> tuple[str, ...]:
        """The model's attnames the document sets: plain fields, foreign keys' ids, cable ends."""
        names = [*self.plain, *(self.model._meta.get_field(ref.attr).attname for ref in self.refs.values())]
        if self.name == "cables":
            names += [f"{side}_{part}" for side in "ab" for part in ("nic_id", "switch_id", "port")]
        return tuple(names)

    @cached_property
    def key_paths(self) -> tuple[str, ...]:
        """values() paths of the natural key, which is also the export's order."""
        if self.name == "cables":
            return ()
        return tuple(path for name in self.key for path in (self.refs[name].paths if name in self.refs else (name,)))

    def column_of(self, model_field: str) -> str | None:
        """The document field a model field's error belongs to."""
        if model_field == "__all__":
            return None
        if self.name == "cables" and model_field[:2] in ("a_", "b_"):
            return model_field[0]
        return model_field


# Columns with their own handling: many-to-many sets and cable ends.
_SPECIAL_COLUMNS = {"tags", "peer_gpus", "a", "b"}


def _ref(target: str, attr: str, *paths: str) -> _Ref:
    return _Ref(target, attr, paths)


_SITE = _ref("sites", "site", "site__slug")
_NODE = _ref("nodes", "node", "node__hostname")
_RACK = _ref("racks", "rack", "rack__site__slug", "rack__name")


SECTIONS: tuple[_Section, ...] = (
    _Section("sites", Site, key=("slug",), columns=("slug", "name", "description")),
    _Section(
        "racks", Rack, key=("site", "name"), refs={"site": _SITE}, related=("site",),
        columns=("site", "name", "row", "position", "u_height", "power_budget_kw"),
    ),
    _Section("tags", Tag, key=("slug",), columns=("slug", "name", "colour")),
    _Section(
        "gpu_skus", GpuSku, key=("name",),
        columns=("name", "vendor", "architecture", "form_factor", "hbm_gib", "mem_bandwidth_tbps",
                 "mem_bandwidth_reference_tbps", "nvlink_gbps", "tdp_w", "bf16_dense_tflops", "fp8_dense_tflops",
                 "pcie_gen"),
    ),
    _Section(
        "nodes", Node, key=("hostname",), related=("rack",),
        refs={"rack": _RACK, "gpu_sku": _ref("gpu_skus", "gpu_sku", "gpu_sku__name")},
        columns=("hostname", "role", "status", "rack", "u_position", "u_height", "management_ip", "ssh_port",
                 "bmc_address", "gpu_sku", "expected_gpu_count", "cpu_model", "cpu_sockets", "cpu_cores",
                 "memory_gib", "numa_nodes", "tags", "comments"),
    ),
    _Section(
        "gpus", Gpu, key=("node", "index"), related=("node",),
        refs={"node": _NODE, "sku": _ref("gpu_skus", "sku", "sku__name")},
        columns=("node", "index", "sku", "uuid", "serial", "pci_bus_id", "numa_node", "pcie_switch", "health"),
    ),
    _Section(
        "nics", Nic, key=("node", "name"), related=("node",), refs={"node": _NODE},
        columns=("node", "name", "mac", "purpose", "speed_gbps", "mtu", "rdma_capable", "transport", "plane",
                 "pfc_priorities", "ecn_enabled", "numa_node", "pci_address", "pcie_switch", "link_up", "peer_gpus"),
    ),
    _Section(
        "switches", Switch, key=("name",), refs={"site": _SITE, "rack": _RACK},
        columns=("name", "site", "rack", "plane", "tier", "model", "port_count", "port_speed_gbps", "management_ip"),
    ),
    _Section(
        "cables", Cable, key=("a",), related=("a_nic__node", "a_switch", "b_nic__node", "b_switch"),
        columns=("a", "b", "speed_gbps", "medium", "plane", "label"),
    ),
    _Section(
        "storage_tiers", StorageTier, key=("site", "name"), refs={"site": _SITE}, related=("site",),
        columns=("site", "name", "kind", "medium", "bandwidth_gbps", "required_bandwidth_gbps", "capacity_tb"),
    ),
    _Section(
        "volumes", Volume, key=("node", "mount_point"), related=("node",),
        refs={"node": _NODE, "tier": _ref("storage_tiers", "tier", "tier__site__slug", "tier__name")},
        columns=("node", "mount_point", "tier", "capacity_gb"),
    ),
    _Section(
        "firmware", Firmware, key=("node", "component", "target"), refs={"node": _NODE}, related=("node",),
        columns=("node", "component", "target", "version"),
    ),
    _Section(
        "host_keys", SshHostKey, key=("node", "fingerprint"), related=("node",),
        refs={"node": _NODE, "approved_by": _ref("users", "approved_by", "approved_by__username")},
        columns=("node", "fingerprint", "public_key", "state", "approved_by"),
    ),
)  # fmt: skip
SECTIONS_BY_NAME = {section.name: section for section in SECTIONS}
SECTION_NAMES = tuple(SECTIONS_BY_NAME)
# Sections whose objects other rows point foreign keys at (cable ends included).
_FOREIGN_KEY_TARGETS = {ref.target for section in SECTIONS for ref in section.refs.values()} | {"nics", "switches"}

# Targets whose natural key is one text value, and what a person calls them.
_SCALAR_TARGETS = {"sites": "site", "tags": "tag", "gpu_skus": "GPU SKU", "nodes": "node", "switches": "switch",
                   "users": "user"}  # fmt: skip
_PAIR_TARGETS = {"racks": "rack", "storage_tiers": "storage tier"}


def _describe(target: str, key: tuple) -> str:
    if target in _PAIR_TARGETS:
        return f"{_PAIR_TARGETS[target]} '{key[1]}' in site '{key[0]}'"
    if target == "gpus":
        return f"GPU {key[1]} of node '{key[0]}'"
    if target == "nics":
        return f"NIC '{key[1]}' of node '{key[0]}'"
    return f"{_SCALAR_TARGETS[target]} '{key[0]}'"


# --- Export ---------------------------------------------------------------------------------------------------------


def export_inventory(*, fmt: str) -> str:
    """The whole inventory as one document (see the module docstring), in "json" or "yaml". A constant number of
    queries, whatever the size of the inventory."""
    if fmt not in DOCUMENT_FORMATS:
        raise ValueError(f"fmt must be one of {', '.join(DOCUMENT_FORMATS)}, not {fmt!r}")
    document: dict[str, Any] = {"version": DOCUMENT_VERSION}
    for section in SECTIONS:
        document[section.name] = _export_section(section)
    return _dump_json(document) if fmt == "json" else _dump_yaml(document)


def export_nodes_csv() -> str:
    """One row per node, the columns of NODE_CSV_COLUMNS; tags joined with ';'. import_inventory(fmt="csv") reads it."""
    tags = _tags_by_node()
    rows = Node.objects.order_by("hostname").values_list(
        "id", "hostname", "role", "status", "rack__site__slug", "rack__name", "u_position", "u_height", "management_ip",
        "bmc_address", "gpu_sku__name", "expected_gpu_count", "cpu_model", "cpu_sockets", "cpu_cores", "memory_gib",
        "numa_nodes",
    )  # fmt: skip
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(NODE_CSV_COLUMNS)
    for node_id, *values in rows:
        cells = ["" if value is None else value for value in values]
        writer.writerow([*cells, CSV_TAG_SEPARATOR.join(tags.get(node_id, []))])
    return out.getvalue()


def _export_section(section: _Section) -> list[dict]:
    """The section's rows: one values_list() query, each column read by a getter made once for the section."""
    paths: list[str] = ["id"]
    getters: list[tuple[str, Callable[[tuple], Any]]] = []
    many = {"nodes": _tags_by_node, "nics": _peer_gpus_by_nic}.get(section.name, dict)()
    for column in section.columns:
        start = len(paths)
        if column in section.refs:
            paths.extend(section.refs[column].paths)
        elif column in ("a", "b"):
            paths.extend(_end_paths(column))
        elif column not in _SPECIAL_COLUMNS:
            paths.append(column)
        getters.append((column, _column_getter(section, column, start, paths, many)))
    rows = section.model.objects.order_by(*section.key_paths).values_list(*paths)
    exported = [{column: get(row) for column, get in getters} for row in rows]
    if section.name == "cables":
        exported.sort(key=lambda row: _end_sort_key(row["a"]))
    return exported


def _column_getter(section: _Section, column: str, at: int, paths: list[str], many: dict) -> Callable[[tuple], Any]:
    """How to read one document field from a values_list() row whose fields for `column` start at `at`."""
    if column in ("a", "b"):
        return lambda row: _end_value(*row[at : at + 4])
    if column in section.refs and len(section.refs[column].paths) == 2:
        return lambda row: None if row[at + 1] is None else {"site": row[at], "name": row[at + 1]}
    if column == "tags":
        return lambda row: many.get(row[0], [])
    if column == "peer_gpus":
        node = paths.index("node__hostname")
        return lambda row: [
            index if hostname == row[node] else {"node": hostname, "index": index}
            for hostname, index in many.get(row[0], ())
        ]
    if column not in section.refs and isinstance(section.model._meta.get_field(column), models.DecimalField):
        return lambda row: None if row[at] is None else float(row[at])
    return itemgetter(at)


def _end_paths(side: str) -> tuple[str, ...]:
    return (f"{side}_nic__node__hostname", f"{side}_nic__name", f"{side}_switch__name", f"{side}_port")


def _end_value(hostname: str | None, nic: str | None, switch: str | None, port: str) -> dict:
    return {"node": hostname, "nic": nic} if nic is not None else {"switch": switch, "port": port}


def _end_sort_key(end: dict) -> tuple:
    return ("nic", end["node"], end["nic"]) if "nic" in end else ("switch", end["switch"], end["port"])


def _tags_by_node() -> dict[int, list[str]]:
    tags: dict[int, list[str]] = defaultdict(list)
    for node_id, slug in Node.tags.through.objects.order_by("tag__slug").values_list("node_id", "tag__slug"):
        tags[node_id].append(slug)
    return tags


def _peer_gpus_by_nic() -> dict[int, list[tuple[str, int]]]:
    peers: dict[int, list[tuple[str, int]]] = defaultdict(list)
    links = Nic.peer_gpus.through.objects.order_by("gpu__node__hostname", "gpu__index")
    for nic_id, hostname, index in links.values_list("nic_id", "gpu__node__hostname", "gpu__index"):
        peers[nic_id].append((hostname, index))
    return peers


_JSON_ITEM = json.JSONEncoder(ensure_ascii=False)


def _dump_json(document: dict) -> str:
    """Valid JSON with one object per line: greppable, reviewable as a diff, and a line number is an item."""
    parts = ["{", f'  "version": {json.dumps(document["version"])}']
    for name in SECTION_NAMES:
        items = document[name]
        if not items:
            parts[-1] += ","
            parts.append(f'  "{name}": []')
            continue
        parts[-1] += ","
        parts.append(f'  "{name}": [')
        parts.append(",\n".join("    " + _JSON_ITEM.encode(item) for item in items))
        parts.append("  ]")
    parts.append("}")
    return "\n".join(parts) + "\n"


def _dump_yaml(document: dict) -> str:
    """Block-style YAML, one `key: value` line per field, references in flow style (`rack: {site: dc1, name: r01}`).
    Written directly: PyYAML's representer takes minutes over a large inventory. Text is left plain only where
    PyYAML's own resolver reads it back as the same text; otherwise it is double-quoted."""
    out = [f"version: {document['version']}"]
    for name in SECTION_NAMES:
        items = document[name]
        out.append(f"{name}:" if items else f"{name}: []")
        for item in items:
            prefix = "- "
            for key, value in item.items():
                out.append(f"{prefix}{_yaml_text(key)}: {_yaml_flow(value)}")
                prefix = "  "
            if prefix == "- ":
                out.append("- {}")
    return "\n".join(out) + "\n"


def _yaml_flow(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_yaml_text(key)}: {_yaml_flow(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_yaml_flow(item) for item in value) + "]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text if _yaml_tag(text) == "tag:yaml.org,2002:float" else _yaml_quoted(text)
    return _yaml_text(value)


# Plain scalars: a letter or digit first; then words of safe characters, joined by single spaces or by colons that
# are not followed by a space. Nothing YAML gives a meaning to: no `#`, `: `, `,[]{}`, quotes or leading indicator.
_YAML_PLAIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._/@+()-]|[: ](?=[A-Za-z0-9._/@+()-]))*")
_YAML_ESCAPED = re.compile('[\\\\"\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff\ud800-\udfff]')
_YAML_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}
_YAML_RESOLVER = yaml.resolver.Resolver()


def _yaml_tag(text: str) -> str:
    return _YAML_RESOLVER.resolve(yaml.ScalarNode, text, (True, False))


@lru_cache(maxsize=65536)
def _yaml_text(text: str) -> str:
    if _YAML_PLAIN.fullmatch(text) and _yaml_tag(text) == "tag:yaml.org,2002:str":
        return text
    return _yaml_quoted(text)


def _yaml_quoted(text: str) -> str:
    def escape(match: re.Match) -> str:
        char = match.group()
        return _YAML_ESCAPES.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")

    return '"' + _YAML_ESCAPED.sub(escape, text) + '"'


# --- Import: reading the file ---------------------------------------------------------------------------------------


@dataclass
class _Item:
    section: str
    index: int
    data: Any
    line: int | None = None
    field_lines: dict[str, int] = field(default_factory=dict)
    error: str | None = None  # what makes the row unreadable, before any field is looked at


def _problem(section: str, line: int | None, message: str, field_name: str | None = None) -> ImportRejected:
    return ImportRejected([ImportProblem(section, line, field_name, message)])


def _read_json(text: str) -> tuple[Any, None]:
    try:
        return json.loads(text, parse_float=Decimal), None
    except json.JSONDecodeError as error:
        raise _problem("document", error.lineno, f"Invalid JSON: {error.msg} (column {error.colno}).") from None
    except RecursionError:
        raise _problem("document", None, "Invalid JSON: nested too deeply.") from None


@dataclass
class _YamlLines:
    keys: dict[str, int] = field(default_factory=dict)
    items: dict[tuple[str, int], tuple[int, dict[str, int]]] = field(default_factory=dict)


def _read_yaml(text: str) -> tuple[Any, _YamlLines]:
    loader = _YAML_LOADER(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f" (column {mark.column + 1})" if mark else ""
        line = mark.line + 1 if mark else None
        raise _problem("document", line, f"Invalid YAML: {error.problem or error.context}{where}.") from None
    except yaml.YAMLError as error:
        raise _problem("document", None, f"Invalid YAML: {error}.") from None
    finally:
        loader.dispose()
    lines = _YamlLines()
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            lines.keys[str(key_node.value)] = key_node.start_mark.line + 1
            if not isinstance(value_node, yaml.SequenceNode):
                continue
            for position, item_node in enumerate(value_node.value, start=1):
                fields = {}
                if isinstance(item_node, yaml.MappingNode):
                    fields = {str(k.value): k.start_mark.line + 1 for k, _ in item_node.value}
                lines.items[(str(key_node.value), position)] = (item_node.start_mark.line + 1, fields)
    return data, lines


def _document_items(data: Any, lines: _YamlLines | None) -> list[_Item]:
    """The rows of a JSON or YAML document, in section order; refuses a document of the wrong shape."""
    lines = lines or _YamlLines()
    if not isinstance(data, dict):
        raise _problem(
            "document", 1, f"The document is a mapping with 'version: {DOCUMENT_VERSION}' and the sections to import."
        )
    problems = []
    if "version" not in data:
        problems.append(
            ImportProblem("document", 1, "version", f"Missing 'version' (this reads version {DOCUMENT_VERSION}).")
        )
    elif type(data["version"]) is not int or data["version"] != DOCUMENT_VERSION:
        problems.append(
            ImportProblem(
                "document", lines.keys.get("version"), "version",
                f"Version {data['version']!r} is not supported (this reads version {DOCUMENT_VERSION}).",
            )
        )  # fmt: skip
    for key in data:
        if key != "version" and key not in SECTIONS_BY_NAME:
            problems.append(
                ImportProblem(
                    "document", lines.keys.get(str(key)), str(key),
                    f"Unknown section '{key}'; the sections are {', '.join(SECTION_NAMES)}.",
                )
            )  # fmt: skip
    items = []
    for name in SECTION_NAMES:
        rows = data.get(name)
        if rows is None:
            continue
        if not isinstance(rows, list):
            problems.append(ImportProblem(name, lines.keys.get(name), None, f"Give the {name} as a list."))
            continue
        for position, row in enumerate(rows, start=1):
            line, fields = lines.items.get((name, position), (None, {}))
            items.append(_Item(name, position, row, line, fields))
    if problems:
        raise ImportRejected(problems)
    return items


def _csv_items(text: str) -> list[_Item]:
    """The rows of a nodes CSV as node rows of the document. An empty cell clears a field that may be empty (rack,
    u_position, management_ip, gpu_sku, text, tags) and leaves any other alone (a new node takes its default)."""
    reader = csv.reader(io.StringIO(text))
    try:
        header = [column.strip() for column in next(reader, [])]
        if not any(header):
            raise _problem("nodes", 1, "The file is empty; the first line names the columns.")
        problems = [
            ImportProblem(
                "nodes", 1, column, f"Unknown column '{column}'; the columns are {', '.join(NODE_CSV_COLUMNS)}."
            )
            for column in header
            if column not in NODE_CSV_COLUMNS
        ]
        problems += [
            ImportProblem("nodes", 1, column, f"Column '{column}' appears twice.")
            for position, column in enumerate(header)
            if column in header[:position]
        ]
        if "hostname" not in header:
            problems.append(ImportProblem("nodes", 1, "hostname", "The file needs a 'hostname' column."))
        if problems:
            raise ImportRejected(problems)
        items, row_line, position = [], reader.line_num + 1, 0
        for cells in reader:
            line, row_line = row_line, reader.line_num + 1
            if not any(cell.strip() for cell in cells):
                continue
            position += 1
            if len(cells) != len(header):
                items.append(
                    _Item("nodes", position, None, line, error=f"{len(cells)} values for {len(header)} columns.")
                )
            else:
                data = _csv_row(dict(zip(header, (cell.strip() for cell in cells), strict=True)))
                items.append(_Item("nodes", position, data, line))
        return items
    except csv.Error as error:
        raise _problem("nodes", reader.line_num, f"Invalid CSV: {error}.") from None


def _csv_row(cells: dict[str, str]) -> dict:
    data: dict[str, Any] = {}
    for column, value in cells.items():
        if column == "site":
            continue
        if column == "rack":
            data["rack"] = {"site": cells.get("site", ""), "name": value} if value else None
        elif column == "tags":
            data["tags"] = [tag.strip() for tag in value.split(CSV_TAG_SEPARATOR) if tag.strip()]
        elif column in ("u_position", "management_ip", "gpu_sku"):
            data[column] = value or None
        elif column in ("hostname", "bmc_address", "cpu_model") or value:
            data[column] = value
    return data


def _json_item_lines(text: str) -> dict[tuple[str, int], int]:
    """Where each item of each section starts, for problem reports; a slower pure-Python parse, run only then."""
    newlines = [match.start() for match in re.finditer("\n", text)]
    starts: dict[int, int] = {}

    class Decoder(json.JSONDecoder):
        def __init__(self):
            super().__init__(parse_float=Decimal)

            def parse_object(s_and_end, *args):
                obj, end = JSONObject(s_and_end, *args)
                starts[id(obj)] = bisect.bisect_left(newlines, s_and_end[1]) + 1
                return obj, end

            self.parse_object = parse_object
            self.scan_once = py_make_scanner(self)

    data = Decoder().decode(text)
    return {
        (name, position): starts[id(row)]
        for name in SECTION_NAMES
        if isinstance(data.get(name), list)
        for position, row in enumerate(data[name], start=1)
        if id(row) in starts
    }


# --- Import: converting values --------------------------------------------------------------------------------------


class _Invalid(Exception):
    """A value that cannot be what its field holds."""


_TEXT_FIELDS = (models.CharField, models.TextField, models.GenericIPAddressField)
_WHOLE_NUMBER = re.compile(r"^[+-]?\d+$")
_BOOLEANS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def _convert(model_field: models.Field, value: Any) -> Any:
    """The Python value of a document value. Stricter than to_python(): YAML's `7.10` is a number, not text."""
    if value is None or (value == "" and model_field.null):
        if model_field.null:
            return None
        if isinstance(model_field, _TEXT_FIELDS):
            return ""
        raise _Invalid("This field cannot be empty.")
    if isinstance(model_field, models.BooleanField):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _BOOLEANS:
            return _BOOLEANS[value.strip().lower()]
        raise _Invalid(f"Enter true or false, not {value!r}.")
    if isinstance(model_field, models.DecimalField):
        return _convert_decimal(value)
    if isinstance(model_field, models.IntegerField):
        return _convert_integer(value)
    if isinstance(model_field, _TEXT_FIELDS):
        if not isinstance(value, str):
            raise _Invalid(f"Enter text, not {type(value).__name__} {value!r} (in YAML, put it in quotes).")
        return value
    if isinstance(model_field, models.JSONField):
        return value
    try:
        return model_field.to_python(value)
    except ValidationError as error:
        raise _Invalid(" ".join(error.messages)) from None


def _convert_integer(value: Any) -> int:
    if isinstance(value, bool):
        raise _Invalid(f"Enter a whole number, not {value!r}.")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value():
        return int(value)
    if isinstance(value, str) and _WHOLE_NUMBER.match(value.strip()):
        return int(value)
    raise _Invalid(f"Enter a whole number, not {value!r}.")


def _convert_decimal(value: Any) -> Decimal:
    if isinstance(value, bool):
        raise _Invalid(f"Enter a number, not {value!r}.")
    try:
        number = (
            Decimal(repr(value))
            if isinstance(value, float)
            else Decimal(value.strip() if isinstance(value, str) else value)
        )
    except (InvalidOperation, TypeError, ValueError):
        raise _Invalid(f"Enter a number, not {value!r}.") from None
    if not number.is_finite():
        raise _Invalid(f"Enter a number, not {value!r}.")
    return number


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise _Invalid(f"Name the {what} as text.")
    return value


def _ref_key(target: str, value: Any) -> tuple:
    """The natural key a reference gives, checked for shape only."""
    if target in _PAIR_TARGETS:
        label = _PAIR_TARGETS[target]
        if not isinstance(value, dict) or set(value) != {"site", "name"}:
            raise _Invalid(f"Give the {label} as {{site: <site slug>, name: <{label} name>}}.")
        if not value["site"] or not value["name"]:
            raise _Invalid(f"Give both the site and the name of the {label}.")
        return (_text(value["site"], "site"), _text(value["name"], label))
    return (_text(value, _SCALAR_TARGETS[target]),)


def _end_key(value: Any) -> tuple:
    if isinstance(value, dict) and set(value) == {"node", "nic"}:
        return ("nic", _text(value["node"], "node"), _text(value["nic"], "NIC"))
    if isinstance(value, dict) and set(value) == {"switch", "port"}:
        return ("switch", _text(value["switch"], "switch"), _text(value["port"], "port"))
    raise _Invalid("Give a cable end as {node: <host name>, nic: <NIC name>} or {switch: <name>, port: <port>}.")


def _peer_key(value: Any, hostname: str) -> tuple:
    if isinstance(value, int) and not isinstance(value, bool):
        return (hostname, value)
    if isinstance(value, dict) and set(value) == {"node", "index"}:
        return (_text(value["node"], "node"), _convert_integer(value["index"]))
    raise _Invalid("Give each peer GPU as its index on this node, or as {node: <host name>, index: <n>}.")


# --- Import: applying rows ------------------------------------------------------------------------------------------


class _Row:
    """One row's problems, in the importer's list."""

    def __init__(self, importer: "_Importer", item: _Item):
        self.importer, self.item, self.failed = importer, item, False

    def add(self, field_name: str | None, message: str) -> None:
        self.failed = True
        line = self.item.field_lines.get(field_name, self.item.line) if field_name else self.item.line
        self.importer.problems.append(ImportProblem(self.item.section, line, field_name, message, self.item.index))

    def add_validation(self, section: _Section, error: ValidationError) -> None:
        if hasattr(error, "error_dict"):
            for model_field, messages in error.message_dict.items():
                for message in messages:
                    self.add(section.column_of(model_field), message)
        else:
            for message in error.messages:
                self.add(None, message)


class _Importer:
    """Applies rows in file order. Existing rows are known by natural key and stored values (values() queries, one
    per section); a model instance is loaded only for a row that changes, or to be the target of one."""

    def __init__(self) -> None:
        self.problems: list[ImportProblem] = []
        self.result = ImportResult()
        self._keys: dict[str, dict[tuple, int]] = {}
        self._stored: dict[str, dict[int, dict[str, Any]]] = {}
        self._objects: dict[str, dict[int, models.Model]] = defaultdict(dict)
        self._failed: dict[str, set[tuple]] = defaultdict(set)
        self._seen: dict[str, dict[tuple, _Item]] = defaultdict(dict)
        self._m2m: dict[str, dict[int, set[int]]] = {}

    def run(self, items: list[_Item]) -> None:
        for item in items:
            if item.section not in self.result.sections:
                self._stored.clear()  # the previous section's stored values are not needed again
                self.result.sections[item.section] = SectionCounts()
            outcome = self._import(SECTIONS_BY_NAME[item.section], item)
            if outcome:
                counts = self.result.sections[item.section]
                setattr(counts, outcome, getattr(counts, outcome) + 1)

    def keys(self, target: str) -> dict[tuple, int]:
        """Natural key -> primary key of a section: what the database holds, then what this file has saved."""
        if target not in self._keys:
            if target == "users":
                users = get_user_model()
                rows = users.objects.values_list("pk", users.USERNAME_FIELD)
                self._keys[target] = {(username,): pk for pk, username in rows}
            elif target == "cables":
                rows = Cable.objects.values_list("pk", *_end_paths("a"))
                self._keys[target] = {_end_key(_end_value(*ends)): pk for pk, *ends in rows}
            else:
                rows = SECTIONS_BY_NAME[target].model.objects.values_list("pk", *SECTIONS_BY_NAME[target].key_paths)
                self._keys[target] = {tuple(key): pk for pk, *key in rows}
        return self._keys[target]

    def stored(self, section: _Section, pk: int) -> dict[str, Any]:
        """The stored values of an existing row, by attname, for telling whether the file changes it."""
        if section.name not in self._stored:
            rows = section.model.objects.values("pk", *section.attnames)
            self._stored[section.name] = {row.pop("pk"): row for row in rows}
        return self._stored[section.name][pk]

    def instance(self, target: str, pk: int) -> models.Model:
        """The object with this primary key, loaded once (with what its clean() and __str__() read)."""
        found = self._objects[target].get(pk)
        if found is None:
            if target == "users":
                found = get_user_model().objects.get(pk=pk)
            else:
                section = SECTIONS_BY_NAME[target]
                found = section.model.objects.select_related(*section.related).get(pk=pk)
            self._objects[target][pk] = found
        return found

    def current_links(self, name: str) -> dict[int, set[int]]:
        if name not in self._m2m:
            through, source, target = (
                (Node.tags.through, "node_id", "tag_id")
                if name == "tags"
                else (Nic.peer_gpus.through, "nic_id", "gpu_id")
            )
            links: dict[int, set[int]] = defaultdict(set)
            for source_id, target_id in through.objects.values_list(source, target):
                links[source_id].add(target_id)
            self._m2m[name] = links
        return self._m2m[name]

    def _import(self, section: _Section, item: _Item) -> str | None:
        row = _Row(self, item)
        data = item.data
        if item.error:
            row.add(None, item.error)
            return None
        if not isinstance(data, dict):
            row.add(None, f"Each item of {section.name} is a mapping of field names to values.")
            return None
        for name in data:
            if name not in section.columns:
                row.add(str(name), f"Unknown field '{name}'; {section.name} have {', '.join(section.columns)}.")
        if section.name == "host_keys":
            self._fingerprint(data, row)
        key = self._key(section, data, row)
        if key is None:
            return None
        if key in self._seen[section.name]:
            first = self._seen[section.name][key]
            where = f"line {first.line}" if first.line else f"item {first.index}"
            row.add(section.key[-1], f"Given twice: also at {where}.")
            return None
        self._seen[section.name][key] = item

        pk = self.keys(section.name).get(key)
        skip = {"public_id"}
        wanted = self._plain_values(section, data, row, skip)
        targets, blocked = self._references(section, data, row, skip, wanted)
        wanted.update({_attname(section.model, attr): target_pk for attr, (_, target_pk) in targets.items()})
        links = self._links(section, data, row, key)
        blocked = blocked or links is None
        stored = self.stored(section, pk) if pk is not None else {}
        dirty = pk is None or any(stored[attname] != value for attname, value in wanted.items())
        dirty = dirty or any(
            wanted_ids != self.current_links(name).get(pk, set()) for name, wanted_ids in links.items()
        )
        if not dirty and not row.failed and not blocked:
            return "unchanged"

        instance = self.instance(section.name, pk) if pk is not None else section.model()
        for attname, value in wanted.items():
            setattr(instance, attname, value)
        for attr, (target, target_pk) in targets.items():
            # The target itself, not just its id: clean() and __str__() read it, and would query it row by row.
            setattr(instance, attr, self.instance(target, target_pk) if target_pk is not None else None)
        whole = not blocked and not skip & _relations(section.model)
        self._validate(section, instance, skip, whole=whole, row=row)
        if row.failed or blocked or not self._save(section, instance, links, row):
            self._failed[section.name].add(key)
            return None
        self.keys(section.name)[key] = instance.pk
        if section.name in _FOREIGN_KEY_TARGETS:
            self._objects[section.name][instance.pk] = instance
        return "created" if pk is None else "updated"

    def _validate(self, section: _Section, instance, skip: set[str], *, whole: bool, row: _Row) -> None:
        """full_clean(), less the queries this import makes redundant: references were found in the index (no
        existence query per foreign key), natural keys were looked up there (no uniqueness query for them), and the
        model's Meta.constraints are enforced by the database when the row is saved. Without `whole` (a reference
        is missing), only each field alone: the model's own rules need the whole row."""
        relations = _relations(section.model)
        errors: dict = {}
        try:
            instance.clean_fields(exclude=skip | relations)
        except ValidationError as error:
            errors = error.update_error_dict(errors)
        for model_field in section.model._meta.concrete_fields:
            missing = getattr(instance, model_field.attname) is None and not model_field.null
            if missing and model_field.name in relations - skip:
                errors.setdefault(model_field.name, []).append(model_field.error_messages["null"])
        if whole:
            try:
                instance.clean()
            except ValidationError as error:
                errors = error.update_error_dict(errors)
            looked_up = {name for name in section.key if name in section.plain}
            try:
                instance.validate_unique(exclude=skip | looked_up | set(errors))
            except ValidationError as error:
                errors = error.update_error_dict(errors)
        if errors:
            row.add_validation(section, ValidationError(errors))

    def _fingerprint(self, data: dict, row: _Row) -> None:
        """A host key's fingerprint is its natural key: computed from the key, and checked when given."""
        public_key = data.get("public_key")
        if not isinstance(public_key, str):
            return
        try:
            fingerprint = fingerprint_of(public_key)
        except ValueError:
            return  # the model's clean() says what is wrong with the key
        if data.setdefault("fingerprint", fingerprint) != fingerprint:
            row.add("fingerprint", f"Does not match the public key, whose fingerprint is {fingerprint}.")

    def _key(self, section: _Section, data: dict, row: _Row) -> tuple | None:
        parts: list = []
        for name in section.key:
            try:
                if name in section.refs:
                    if data.get(name) is None:
                        raise _Invalid(f"Missing '{name}', part of what names each of the {section.name}.")
                    parts.extend(_ref_key(section.refs[name].target, data[name]))
                elif name == "a":
                    parts.extend(_end_key(data.get(name)))
                else:
                    model_field = section.model._meta.get_field(name)
                    value = _convert(model_field, data[name]) if name in data else model_field.get_default()
                    if value in (None, "") and not model_field.blank:
                        raise _Invalid(f"Missing '{name}', part of what names each of the {section.name}.")
                    parts.append(value)
            except _Invalid as error:
                row.add(name, str(error))
                return None
        return tuple(parts)

    def _plain_values(self, section: _Section, data: dict, row: _Row, skip: set[str]) -> dict[str, Any]:
        wanted = {}
        for name in section.plain:
            if name not in data:
                continue
            try:
                wanted[name] = _convert(section.model._meta.get_field(name), data[name])
            except _Invalid as error:
                row.add(name, str(error))
                skip.add(name)
        return wanted

    def _references(
        self, section: _Section, data: dict, row: _Row, skip: set[str], wanted: dict[str, Any]
    ) -> tuple[dict[str, tuple[str, int | None]], bool]:
        """{foreign key: (target section, target's primary key or None)} for the references the row gives, and
        whether a target had problems of its own (reported at the target). A reference that cannot be resolved is
        a problem of this row, and its foreign key is left out."""
        found: dict[str, tuple[str, int | None]] = {}
        blocked = False
        references = [(name, ref.attr, ref.target, None) for name, ref in section.refs.items() if name in data]
        if section.name == "cables":
            references += self._cable_ends(data, row, skip, wanted, found)
        for name, attr, target, key in references:
            target_pk = self._resolve(target, data[name], name, row, key=key)
            if target_pk is _BLOCKED or target_pk is _MISSING:
                blocked = blocked or target_pk is _BLOCKED
                skip.add(attr)
                continue
            found[attr] = (target, target_pk)
        return found, blocked

    def _cable_ends(self, data: dict, row: _Row, skip: set[str], wanted: dict, found: dict) -> list[tuple]:
        """A cable end is a NIC, or a switch and a port. Sets the port and clears the other kind of end; returns
        the reference to resolve."""
        references = []
        for side in ("a", "b"):
            if side not in data:
                continue
            try:
                kind, owner, port = _end_key(data[side])  # ("nic", host name, NIC name) or ("switch", name, port)
            except _Invalid as error:
                row.add(side, str(error))
                skip.update((f"{side}_nic", f"{side}_switch"))
                continue
            if kind == "nic":
                references.append((side, f"{side}_nic", "nics", (owner, port)))
                found[f"{side}_switch"], wanted[f"{side}_port"] = ("switches", None), ""
            else:
                references.append((side, f"{side}_switch", "switches", (owner,)))
                found[f"{side}_nic"], wanted[f"{side}_port"] = ("nics", None), port
        return references

    def _resolve(self, target: str, value: Any, name: str, row: _Row, key: tuple | None = None):
        """The primary key a reference names, None for none, or _BLOCKED / _MISSING."""
        if value is None:
            return None
        try:
            key = key or _ref_key(target, value)
        except _Invalid as error:
            row.add(name, str(error))
            return _MISSING
        if key in self._failed[target]:
            return _BLOCKED
        found = self.keys(target).get(key)
        if found is None:
            row.add(name, f"No {_describe(target, key)} in the inventory or earlier in this file.")
            return _MISSING
        return found

    def _links(self, section: _Section, data: dict, row: _Row, key: tuple) -> dict[str, set[int]] | None:
        """The many-to-many sets the row asks for ({} when none), or None when a target had problems of its own."""
        name = {"nodes": "tags", "nics": "peer_gpus"}.get(section.name)
        if name is None or name not in data:
            return {}
        values = data[name]
        if values is None:
            values = []
        if not isinstance(values, list):
            row.add(name, f"Give the {name.replace('_', ' ')} as a list.")
            return {}
        wanted, blocked = set(), False
        for value in values:
            target = "tags" if name == "tags" else "gpus"
            try:
                target_key = _ref_key("tags", value) if name == "tags" else _peer_key(value, key[0])
            except _Invalid as error:
                row.add(name, str(error))
                continue
            found = self._resolve(target, value, name, row, key=target_key)
            if found is _BLOCKED:
                blocked = True
            elif found is not _MISSING:
                wanted.add(found)
        return None if blocked else {name: wanted}

    def _save(self, section: _Section, instance, links: dict[str, set[int]], row: _Row) -> bool:
        """Saves the row and its many-to-many sets in a savepoint; a database refusal becomes the row's problem."""
        try:
            with transaction.atomic():
                instance.save()
                for name, wanted in links.items():
                    current = self.current_links(name).get(instance.pk, set())
                    manager = getattr(instance, name)
                    manager.remove(*(current - wanted))
                    manager.add(*(wanted - current))
        except DatabaseError as error:
            row.add(*_refusal(section.model, error))
            return False
        for name, wanted in links.items():
            self.current_links(name)[instance.pk] = set(wanted)
        return True


def _attname(model: type[models.Model], name: str) -> str:
    return model._meta.get_field(name).attname


def _relations(model: type[models.Model]) -> set[str]:
    return {model_field.name for model_field in model._meta.concrete_fields if model_field.is_relation}


def _refusal(model: type[models.Model], error: DatabaseError) -> tuple[str | None, str]:
    """(field, message) for a row the database refused: the violated constraint's own message where it can be told
    (PostgreSQL names the constraint; SQLite names a check constraint, or the columns of a unique one)."""
    text = str(error)
    table = model._meta.db_table
    for constraint in model._meta.constraints:
        fields = list(getattr(constraint, "fields", ()))
        columns = [f"{table}.{model._meta.get_field(name).column}" for name in fields]
        if constraint.name in text or (columns and text.endswith(", ".join(columns))):
            return (fields[0] if len(fields) == 1 else None), str(constraint.get_violation_error_message())
    for model_field in model._meta.concrete_fields:
        if model_field.unique and text.endswith(f"{table}.{model_field.column}"):
            return model_field.name, f"Another {model._meta.verbose_name} has this {model_field.verbose_name}."
    return None, f"The database refused this row: {text.splitlines()[0] if text else type(error).__name__}."


_BLOCKED = object()  # the target had problems of its own, already reported
_MISSING = object()  # the target could not be found; the row has a problem saying so


def import_inventory(*, text: str, fmt: str, user=None, dry_run: bool = False) -> ImportResult:
    """Create or update the objects in `text` ("json" or "yaml": the export_inventory() document, all sections
    optional; "csv": the export_nodes_csv() columns, hostname required). All or nothing: raises ImportRejected with
    every problem and changes nothing, or saves every row through the audit log as `user`'s import. With dry_run,
    validates and counts the same way, then rolls back."""
    if fmt not in IMPORT_FORMATS:
        raise ValueError(f"fmt must be one of {', '.join(IMPORT_FORMATS)}, not {fmt!r}")
    text = text.removeprefix("\ufeff")
    if fmt == "csv":
        items = _csv_items(text)
    else:
        items = _document_items(*(_read_json(text) if fmt == "json" else _read_yaml(text)))
    importer = _Importer()
    try:
        with transaction.atomic(), audit_context(source=ChangeSource.IMPORT, user=user):
            importer.run(items)
            if importer.problems:
                raise ImportRejected(importer.problems)
            if dry_run:
                transaction.set_rollback(True)
    except ImportRejected as rejected:
        if fmt == "json":
            lines = _json_item_lines(text)
            rejected.problems = [
                replace(p, line=lines.get((p.section, p.item))) if p.line is None and p.item else p
                for p in rejected.problems
            ]
        raise
    importer.result.dry_run = dry_run
    return importer.result
