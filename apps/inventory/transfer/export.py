"""Export: the whole inventory as one JSON or YAML document, or the nodes as CSV. A constant number of queries."""

import io
import json
import re
from collections import defaultdict
from collections.abc import Callable
from operator import itemgetter
from typing import Any

import yaml
from django.db import models

from apps.core import csvsafe
from apps.inventory.models import Nic, Node
from apps.inventory.transfer.sections import (
    CSV_TAG_SEPARATOR,
    DOCUMENT_FORMATS,
    DOCUMENT_VERSION,
    NODE_CSV_COLUMNS,
    SECTION_NAMES,
    SECTIONS,
    SPECIAL_COLUMNS,
    Section,
    end_paths,
    end_value,
)


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
    writer = csvsafe.writer(out)  # RFC 4180 line ends: a cell holding a CR is quoted
    writer.writerow(NODE_CSV_COLUMNS)
    for node_id, *values in rows:
        cells = ["" if value is None else value for value in values]
        writer.writerow([*cells, CSV_TAG_SEPARATOR.join(tags.get(node_id, []))])
    return out.getvalue()


def _export_section(section: Section) -> list[dict]:
    """The section's rows: one values_list() query, each column read by a getter made once for the section."""
    paths: list[str] = ["id"]
    getters: list[tuple[str, Callable[[tuple], Any]]] = []
    many = {"nodes": _tags_by_node, "nics": _peer_gpus_by_nic}.get(section.name, dict)()
    for column in section.columns:
        start = len(paths)
        if column in section.refs:
            paths.extend(section.refs[column].paths)
        elif column in ("a", "b"):
            paths.extend(end_paths(column))
        elif column not in SPECIAL_COLUMNS:
            paths.append(column)
        getters.append((column, _column_getter(section, column, start, paths, many)))
    rows = section.model.objects.order_by(*section.key_paths).values_list(*paths)
    exported = [{column: get(row) for column, get in getters} for row in rows]
    if section.name == "cables":
        exported.sort(key=lambda row: _end_sort_key(row["a"]))
    return exported


def _column_getter(section: Section, column: str, at: int, paths: list[str], many: dict) -> Callable[[tuple], Any]:
    """How to read one document field from a values_list() row whose fields for `column` start at `at`."""
    if column in ("a", "b"):
        return lambda row: end_value(*row[at : at + 4])
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
    if column not in section.refs and isinstance(section.model._meta.get_field(column), models.UUIDField):
        return lambda row: None if row[at] is None else str(row[at])
    return itemgetter(at)


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


class _Flow(dict):
    """A mapping written on one line: `{site: dc1, name: r01}`."""


class _FlowList(list):
    """A list written on one line: `[0, 1, {node: gpu002, index: 3}]`."""


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):
    """safe_dump's rules (PyYAML quotes text only where its resolver would read it as something else), with the
    document's layout: sections in block style, one `field: value` line per field, references in flow style. Text
    with line breaks or control characters is double-quoted, so that it stays on its one line, escaped."""

    def represent_str(self, data: str):
        style = '"' if _YAML_ESCAPED.search(data) else None
        return self.represent_scalar("tag:yaml.org,2002:str", data, style=style)

    def ignore_aliases(self, data) -> bool:
        return True  # the importer refuses aliases; equal values are written out each time


_Dumper.add_representer(str, _Dumper.represent_str)
_Dumper.add_representer(_Flow, lambda dumper, data: dumper.represent_mapping("tag:yaml.org,2002:map", data, True))
_Dumper.add_representer(_FlowList, lambda dumper, data: dumper.represent_sequence("tag:yaml.org,2002:seq", data, True))
_YAML_ESCAPED = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff]")


def _flow(value: Any) -> Any:
    if isinstance(value, dict):
        return _Flow((key, _flow(item)) for key, item in value.items())
    if isinstance(value, list):
        return _FlowList(_flow(item) for item in value)
    return value


def _dump_yaml(document: dict) -> str:
    """Block-style YAML, one `key: value` line per field, references in flow style (`rack: {site: dc1, name: r01}`).
    Written by PyYAML one row at a time: the output is the same as one dump of the whole document, and each row's
    nodes are let go at once, where the whole document's node graph made the garbage collector the bulk of the time
    (about 3x slower over 36,000 rows)."""
    options = {"Dumper": _Dumper, "sort_keys": False, "allow_unicode": True, "width": 2**30}
    out = [yaml.dump({"version": document["version"]}, **options)]
    for name in SECTION_NAMES:
        rows = document[name]
        out.append(f"{name}:\n" if rows else yaml.dump({name: []}, **options))
        out += (yaml.dump([{key: _flow(value) for key, value in row.items()}], **options) for row in rows)
    return "".join(out)
