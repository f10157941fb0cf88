"""Reading an import: a JSON or YAML document, or a nodes CSV, into the rows of each section with the line each
row (and, in YAML, each field) comes from.

YAML is composed into nodes first (PyYAML's C parser) and checked there, before anything is built from it: an
alias (`*name`) is refused, so a few hundred bytes cannot expand into gigabytes, and a key given twice in one mapping
is an error at its line, where PyYAML would keep the last. JSON is decoded by the json module with a hook that
refuses a key given twice; where a line must be named, a second pass with the pure-Python scanner records where
each object starts.
"""

import bisect
import csv
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from json.decoder import JSONObject
from json.scanner import py_make_scanner
from typing import Any

import yaml

from apps.core import csvsafe
from apps.core.text import cut, echo
from apps.inventory.transfer.problems import ImportProblem, ImportRejected
from apps.inventory.transfer.sections import (
    CSV_TAG_SEPARATOR,
    DOCUMENT_VERSION,
    NODE_CSV_COLUMNS,
    SECTION_NAMES,
    SECTIONS_BY_NAME,
)

# Python refuses to turn text of more digits than this into an int (sys.get_int_max_str_digits()); a longer number
# is read as a Decimal, which has no such limit, and the field it is given for refuses it as out of range.
_INT_DIGITS = 4300


@dataclass
class Item:
    section: str
    index: int
    data: Any
    line: int | None = None
    field_lines: dict[str, int] = field(default_factory=dict)
    error: str | None = None  # what makes the row unreadable, before any field is looked at


def rejection(section: str, line: int | None, message: str, field_name: str | None = None) -> ImportRejected:
    return ImportRejected([ImportProblem(section, line, field_name, message)])


def whole_number(text: str) -> int | Decimal:
    """int(text) for a string of digits (with an optional sign), however long."""
    return int(text) if len(text) <= _INT_DIGITS else Decimal(text)


@dataclass
class Lines:
    """Where things are in the file: each top-level key, and each item of each section with its fields' lines."""

    keys: dict[str, int] = field(default_factory=dict)
    items: dict[tuple[str, int], tuple[int, dict[str, int]]] = field(default_factory=dict)


# --- JSON -------------------------------------------------------------------------------------------------------------


class _KeyTwice(Exception):
    def __init__(self, key: str):
        super().__init__(key)
        self.key, self.line = key, None


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict:
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        raise _KeyTwice(next(key for key, _ in pairs if key in seen or seen.add(key)))
    return data


_JSON_OPTIONS = {"parse_float": Decimal, "parse_int": whole_number, "object_pairs_hook": _unique_pairs}


def read_json(text: str) -> tuple[Any, None]:
    try:
        return json.loads(text, **_JSON_OPTIONS), None
    except json.JSONDecodeError as error:
        raise rejection("document", error.lineno, f"Invalid JSON: {error.msg} (column {error.colno}).") from None
    except RecursionError:
        raise rejection("document", None, "Invalid JSON: nested too deeply.") from None
    except _KeyTwice as error:
        line = _JsonPositions(text).key_twice_line()
        raise rejection("document", line, f"{echo(error.key)} is given twice.", cut(error.key)) from None


class _JsonPositions(json.JSONDecoder):
    """A decoder that records the line where each object starts (the pure-Python scanner, run only to report)."""

    def __init__(self, text: str):
        super().__init__(parse_float=Decimal, parse_int=whole_number, object_pairs_hook=_unique_pairs)
        self.text = text
        self._newlines = [match.start() for match in re.finditer("\n", text)]
        self.starts: dict[int, int] = {}

        def parse_object(s_and_end, *args):
            try:
                obj, end = JSONObject(s_and_end, *args)
            except _KeyTwice as error:
                if error.line is None:
                    error.line = self._key_line(s_and_end[1], error.key)
                raise
            self.starts[id(obj)] = self.line_of(s_and_end[1])
            return obj, end

        self.parse_object = parse_object
        self.scan_once = py_make_scanner(self)

    def line_of(self, position: int) -> int:
        return bisect.bisect_left(self._newlines, position) + 1

    def _key_line(self, start: int, key: str) -> int | None:
        """The line of the second `key` among the keys of the object whose `{` is just before `start`."""
        depth, count = 1, 0
        for token in re.finditer(r'"(?:[^"\\]|\\.)*"\s*:?|[{}\[\]]', self.text[start:]):
            text = token.group()
            if text in "{[":
                depth += 1
            elif text in "}]":
                depth -= 1
                if depth == 0:
                    return None
            elif depth == 1 and text.endswith(":") and json.loads(text[:-1].rstrip()) == key:
                count += 1
                if count == 2:
                    return self.line_of(start + token.start())
        return None

    def key_twice_line(self) -> int | None:
        try:
            self.decode(self.text)
        except _KeyTwice as error:
            return error.line
        return None


def json_item_lines(text: str) -> dict[tuple[str, int], int]:
    """Where each item of each section starts, for problem reports; a slower pure-Python parse, run only then."""
    decoder = _JsonPositions(text)
    data = decoder.decode(text)
    return {
        (name, position): decoder.starts[id(row)]
        for name in SECTION_NAMES
        if isinstance(data.get(name), list)
        for position, row in enumerate(data[name], start=1)
        if id(row) in decoder.starts
    }


# --- YAML -------------------------------------------------------------------------------------------------------------


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """safe_load's loader; whole numbers of any length (see whole_number())."""

    def construct_yaml_int(self, node):
        try:
            return super().construct_yaml_int(node)
        except ValueError:
            digits = str(node.value).replace("_", "")
            if re.fullmatch(r"[-+]?[0-9]+", digits):
                return Decimal(digits)
            raise


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


def read_yaml(text: str) -> tuple[Any, Lines]:
    loader = _Loader(text)
    lines = Lines()
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_nodes(node)
            lines = _yaml_lines(node)
        data = _construct(loader, node) if node is not None else None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f" (column {mark.column + 1})" if mark else ""
        line = mark.line + 1 if mark else None
        raise rejection("document", line, f"Invalid YAML: {error.problem or error.context}{where}.") from None
    except yaml.YAMLError as error:
        raise rejection("document", None, f"Invalid YAML: {echo(str(error), 200)}.") from None
    finally:
        loader.dispose()
    return data, lines


def _construct(loader: _Loader, root: yaml.Node) -> Any:
    """The document built from its nodes, each item of a top-level list built and its node let go of in turn, so
    the nodes and the values built from them are not both held whole. (The walk of _check_nodes() has refused
    aliases, so no node is built twice and the loader's memo can be emptied as it goes.)"""
    if not isinstance(root, yaml.MappingNode):
        return loader.construct_document(root)
    data = {}
    for key_node, value_node in root.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(value_node, yaml.SequenceNode):
            items = []
            for position, item_node in enumerate(value_node.value):
                items.append(loader.construct_object(item_node, deep=True))
                value_node.value[position] = None
                loader.constructed_objects.clear()
            data[key] = items
        else:
            data[key] = loader.construct_object(value_node, deep=True)
    return data


def _check_nodes(root: yaml.Node) -> None:
    """Refuses aliases and keys given twice, walking the composed nodes once (an alias is a node met twice)."""
    problems: list[ImportProblem] = []
    seen: set[int] = set()
    alias_found = False
    stack: list[tuple[yaml.Node, str]] = [(root, "document")]
    while stack:
        node, section = stack.pop()
        if id(node) in seen:
            if not alias_found:  # one is enough to say why; the walk never goes into a node twice
                alias_found = True
                problems.append(
                    ImportProblem(
                        section, node.start_mark.line + 1, None,
                        "This value has an anchor (&name) that an alias (*name) repeats; an import takes no anchors "
                        "or aliases: write each value out.",
                    )
                )  # fmt: skip
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys: set = set()
            children = []
            for key_node, value_node in node.value:
                key = (key_node.tag, key_node.value) if isinstance(key_node, yaml.ScalarNode) else id(key_node)
                if key in keys:
                    name = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else None
                    problems.append(
                        ImportProblem(
                            section, key_node.start_mark.line + 1, name and cut(name), f"{echo(name)} is given twice."
                        )
                    )
                keys.add(key)
                child = str(key_node.value) if node is root and str(key_node.value) in SECTIONS_BY_NAME else section
                children += [(key_node, child), (value_node, child)]
            stack += reversed(children)
        elif isinstance(node, yaml.SequenceNode):
            stack += [(item, section) for item in reversed(node.value)]
    if problems:
        raise ImportRejected(sorted(problems, key=lambda problem: problem.line or 0))


def _yaml_lines(node: yaml.Node | None) -> Lines:
    lines = Lines()
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
    return lines


# --- The rows ---------------------------------------------------------------------------------------------------------


def document_items(data: Any, lines: Lines | None) -> tuple[int, Iterator[Item]]:
    """How many rows a JSON or YAML document holds, and its rows in section order, one at a time: each is let go
    of in the document once given, so the document shrinks as the import goes. Refuses a document of the wrong
    shape at once."""
    lines = lines or Lines()
    if not isinstance(data, dict):
        raise rejection(
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
                f"Version {echo(data['version'])} is not supported (this reads version {DOCUMENT_VERSION}).",
            )
        )  # fmt: skip
    for key in data:
        if key != "version" and key not in SECTIONS_BY_NAME:
            problems.append(
                ImportProblem(
                    "document", lines.keys.get(str(key)), cut(str(key)),
                    f"Unknown section {echo(key)}; the sections are {', '.join(SECTION_NAMES)}.",
                )
            )  # fmt: skip
    sections = []
    for name in SECTION_NAMES:
        rows = data.get(name)
        if rows is None:
            continue
        if not isinstance(rows, list):
            problems.append(ImportProblem(name, lines.keys.get(name), None, f"Give the {name} as a list."))
            continue
        sections.append((name, rows))
    if problems:
        raise ImportRejected(problems)
    return sum(len(rows) for _, rows in sections), _document_rows(sections, lines)


def _document_rows(sections: list[tuple[str, list]], lines: Lines) -> Iterator[Item]:
    for name, rows in sections:
        for position in range(1, len(rows) + 1):
            line, fields = lines.items.pop((name, position), (None, {}))
            row, rows[position - 1] = rows[position - 1], None
            yield Item(name, position, row, line, fields)


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def _lines(text: str) -> Iterator[str]:
    """The text's lines with their endings (\\n, \\r\\n or \\r, as io.StringIO(newline="") splits them), as
    csv.reader wants them, one at a time: no copy of the whole text."""
    return (match.group() for match in _LINE.finditer(text))


def csv_items(text: str) -> tuple[int, Iterator[Item]]:
    """How many rows a nodes CSV holds, and its rows as node rows of the document, read one at a time. An empty
    cell clears a field that may be empty (rack, u_position, management_ip, gpu_sku, text, tags) and leaves any
    other alone (a new node takes its default). A bad header is refused at once; a row the csv module cannot read,
    when it is reached."""
    reader = csv.reader(_lines(text))
    try:
        header = [column.strip() for column in next(reader, [])]
        if not any(header):
            raise rejection("nodes", 1, "The file is empty; the first line names the columns.")
        problems = [
            ImportProblem(
                "nodes",
                1,
                cut(column),
                f"Unknown column {echo(column)}; the columns are {', '.join(NODE_CSV_COLUMNS)}.",
            )
            for column in header
            if column not in NODE_CSV_COLUMNS
        ]
        problems += [
            ImportProblem("nodes", 1, cut(column), f"Column {echo(column)} appears twice.")
            for position, column in enumerate(header)
            if column in header[:position]
        ]
        if "hostname" not in header:
            problems.append(ImportProblem("nodes", 1, "hostname", "The file needs a 'hostname' column."))
        if problems:
            raise ImportRejected(problems)
        total = sum(1 for cells in reader if _filled(cells))
    except csv.Error as error:
        raise rejection("nodes", reader.line_num, f"Invalid CSV: {error}.") from None
    return total, _csv_rows(text, header)


def _filled(cells: list[str]) -> bool:
    return any(csvsafe.unescape(cell.strip()) for cell in cells)


def _csv_rows(text: str, header: list[str]) -> Iterator[Item]:
    reader = csv.reader(_lines(text))
    try:
        next(reader)
        row_line, position = reader.line_num + 1, 0
        for cells in reader:
            line, row_line = row_line, reader.line_num + 1
            if not _filled(cells):
                continue
            position += 1
            if len(cells) != len(header):
                yield Item("nodes", position, None, line, error=f"{len(cells)} values for {len(header)} columns.")
            else:
                data = _csv_row(dict(zip(header, (csvsafe.unescape(cell.strip()) for cell in cells), strict=True)))
                yield Item("nodes", position, data, line)
    except csv.Error as error:
        raise rejection("nodes", reader.line_num, f"Invalid CSV: {error}.") from None


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
