"""Applying an import: every row checked as full_clean() checks it and saved in file order, all or nothing."""

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import DatabaseError, models, transaction

from apps.core.audit import audit_context, record_created
from apps.core.choices import ChangeSource
from apps.core.text import cut, echo
from apps.inventory.hostkeys import fingerprint_of
from apps.inventory.models import Cable, Nic, Node, Pdu, Switch
from apps.inventory.models.mounting import Mounted
from apps.inventory.rackscale import domain_problems
from apps.inventory.transfer.problems import (
    ImportProblem,
    ImportProgress,
    ImportRejected,
    ImportResult,
    SectionCounts,
)
from apps.inventory.transfer.reading import Item, csv_items, document_items, json_item_lines, read_json, read_yaml
from apps.inventory.transfer.sections import (
    FOREIGN_KEY_TARGETS,
    IMPORT_FORMATS,
    SECTIONS_BY_NAME,
    Section,
    describe,
    end_paths,
    end_value,
)
from apps.inventory.transfer.values import Invalid, convert, end_key, peer_key, ref_key

PROGRESS_EVERY = 250  # rows between two progress reports: ~1 s of work, a few events per thousand rows


class _Row:
    """One row's problems, in the importer's list."""

    def __init__(self, importer: "_Importer", item: Item):
        self.importer, self.item, self.failed = importer, item, False

    def add(self, field_name: str | None, message: str) -> None:
        self.failed = True
        line = self.item.field_lines.get(field_name, self.item.line) if field_name else self.item.line
        self.importer.problems.append(ImportProblem(self.item.section, line, field_name, message, self.item.index))

    def add_validation(self, section: Section, error: ValidationError) -> None:
        for each in error.error_list if not hasattr(error, "error_dict") else sum(error.error_dict.values(), []):
            if each.params:  # Django's messages quote the value (`Value 'x…' is not a valid choice.`): cut it
                each.params = {
                    name: cut(value) if isinstance(value, str) else value for name, value in each.params.items()
                }
        if hasattr(error, "error_dict"):
            for model_field, messages in error.message_dict.items():
                for message in messages:
                    self.add(section.column_of(model_field), message)
        else:
            for message in error.messages:
                self.add(None, message)


class _RackOccupancy:
    """Who sits where in each rack: loaded in one query per kind of device, kept up to date as node rows are saved,
    and asked by Node.clean() instead of queries of the rack's devices for every row. The switches and PDUs are
    those stored before the import (their sections come after the nodes'; each of their rows queries its rack)."""

    def __init__(self) -> None:
        self._racks: dict[int, dict[str, tuple[int, int]]] | None = None  # rack id -> {hostname: (U, height)}
        self._rack_of: dict[str, int] = {}
        self._others: dict[int, list[Mounted]] = defaultdict(list)  # rack id -> its switches and U-mounted PDUs

    def _load(self) -> dict[int, dict[str, tuple[int, int]]]:
        if self._racks is None:
            self._racks = defaultdict(dict)
            placed = Node.objects.filter(rack__isnull=False, u_position__isnull=False)
            for hostname, rack_id, u_position, u_height in placed.values_list(
                "hostname", "rack_id", "u_position", "u_height"
            ):
                self._racks[rack_id][hostname] = (u_position, u_height)
                self._rack_of[hostname] = rack_id
            for model in (Switch, Pdu):
                mounted = model.objects.filter(rack__isnull=False, position__isnull=False)
                for rack_id, *device in mounted.values_list("rack_id", "name", "position", "u_height", "face"):
                    self._others[rack_id].append(Mounted(*device))
        return self._racks

    def neighbours(self, node: Node) -> list[Mounted]:
        nodes = [
            Mounted(hostname, u_position, u_height)
            for hostname, (u_position, u_height) in self._load().get(node.rack_id, {}).items()
            if hostname != node.hostname
        ]
        return nodes + self._others.get(node.rack_id, [])

    def saved(self, node: Node) -> None:
        racks = self._load()
        old = self._rack_of.pop(node.hostname, None)
        if old is not None:
            racks[old].pop(node.hostname, None)
        if node.rack_id is not None and node.u_position is not None:
            racks[node.rack_id][node.hostname] = (node.u_position, node.u_height)
            self._rack_of[node.hostname] = node.rack_id


CREATE_BATCH = 500  # new rows created with one INSERT


@dataclass
class _Pending:
    section: Section
    instance: models.Model
    links: dict[str, set[int]]
    row: "_Row"
    key: tuple


def _batchable(model: type[models.Model]) -> bool:
    # bulk_create skips save(): only for models that add nothing to it (the audit entries are written alongside).
    return model.save is models.Model.save


def _m2m_tables(model: type[models.Model]) -> list[tuple[str, type[models.Model], str, str]]:
    """(field name, through model, its column to this model, its column to the target) of each many-to-many."""
    tables = []
    for field in model._meta.many_to_many:
        through = field.remote_field.through
        tables.append((field.name, through, field.m2m_field_name() + "_id", field.m2m_reverse_field_name() + "_id"))
    return tables


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
        self._seen: dict[str, dict[tuple, str]] = defaultdict(dict)  # natural key -> where it first came
        self._m2m: dict[str, dict[int, set[int]]] = {}
        self._occupancy = _RackOccupancy()
        self._pending: list[_Pending] = []  # new rows checked and waiting to be created together (_flush)

    def run(self, total: int, items: Iterable[Item], progress: Callable[[ImportProgress], None] | None = None) -> None:
        """Applies `items` (`total` of them), read one at a time: the file's rows are never all held as rows."""
        written = 0
        for number, item in enumerate(items, start=1):
            if item.section not in self.result.sections:
                self._flush()  # this section's rows may name the last one's
                self._stored.clear()  # the previous section's stored values are not needed again
                self.result.sections[item.section] = SectionCounts()
            outcome = self._import(SECTIONS_BY_NAME[item.section], item)
            if outcome:
                counts = self.result.sections[item.section]
                setattr(counts, outcome, getattr(counts, outcome) + 1)
                written += outcome != "unchanged"
            if progress and (number % PROGRESS_EVERY == 0 or number == total):
                progress(ImportProgress(max(total, number), number, written, item.section))
        self._flush()

    def keys(self, target: str) -> dict[tuple, int]:
        """Natural key -> primary key of a section: what the database holds, then what this file has saved."""
        if target not in self._keys:
            if target == "users":
                users = get_user_model()
                rows = users.objects.values_list("pk", users.USERNAME_FIELD)
                self._keys[target] = {(username,): pk for pk, username in rows}
            elif target == "cables":
                rows = Cable.objects.values_list("pk", *end_paths("a"))
                self._keys[target] = {end_key(end_value(*ends)): pk for pk, *ends in rows}
            else:
                rows = SECTIONS_BY_NAME[target].model.objects.values_list("pk", *SECTIONS_BY_NAME[target].key_paths)
                self._keys[target] = {tuple(key): pk for pk, *key in rows}
        return self._keys[target]

    def stored(self, section: Section, pk: int) -> dict[str, Any]:
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

    def _import(self, section: Section, item: Item) -> str | None:
        row = _Row(self, item)
        data = item.data
        if item.error:
            row.add(None, item.error)
            return None
        if not isinstance(data, dict):
            row.add(None, f"Each item of {section.name} is a mapping of field names to values.")
            return None
        if section.upgrade is not None:
            data = section.upgrade(data)
        for name in data:
            if name not in section.columns:
                have = ", ".join(section.columns)
                row.add(cut(str(name)), f"Unknown field {echo(str(name))}; {section.name} have {have}.")
        if section.name == "host_keys":
            self._fingerprint(data, row)
        key = self._key(section, data, row)
        if key is None:
            return None
        if key in self._seen[section.name]:
            row.add(section.key[-1], f"Given twice: also at {self._seen[section.name][key]}.")
            return None
        self._seen[section.name][key] = f"line {item.line}" if item.line else f"item {item.index}"

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
        if section.name == "nodes":
            instance._known_neighbours = self._occupancy.neighbours
        self._validate(section, instance, skip, whole=whole, row=row)
        if row.failed or blocked:
            self._failed[section.name].add(key)
            return None
        if section.name == "nodes":
            self._occupancy.saved(instance)  # before the save: the next rows are checked against this one
        if pk is None and _batchable(section.model):
            self._pending.append(_Pending(section, instance, links, row, key))
            if len(self._pending) >= CREATE_BATCH:
                self._flush()
            return "created"
        if not self._save(section, instance, links, row):
            self._failed[section.name].add(key)
            return None
        self._saved(section, instance, links, key)
        return "created" if pk is None else "updated"

    def _saved(self, section: Section, instance, links: dict[str, set[int]], key: tuple) -> None:
        self.keys(section.name)[key] = instance.pk
        if section.name in FOREIGN_KEY_TARGETS:
            self._objects[section.name][instance.pk] = instance
        for name, wanted in links.items():
            self.current_links(name)[instance.pk] = set(wanted)

    def _flush(self) -> None:
        """Creates the waiting new rows of one section with one INSERT (and one for their audit entries, one for
        their many-to-many links), in a savepoint. Should the database refuse any, the savepoint goes and the rows
        are saved one by one instead, each in its own, so that the refusal is the problem of the row it belongs to.
        Called before the rows of another section are read: those may name these."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        section = pending[0].section
        instances = [each.instance for each in pending]
        try:
            with transaction.atomic():
                section.model.objects.bulk_create(instances)
                record_created(instances)
                for name, through, source, target in _m2m_tables(section.model):
                    rows = [
                        through(**{source: each.instance.pk, target: target_pk})
                        for each in pending
                        for target_pk in each.links.get(name, ())
                    ]
                    through.objects.bulk_create(rows)
        except DatabaseError:
            for each in pending:
                each.instance.pk = None  # whatever the refused INSERT gave it
                each.instance._state.adding, each.instance._state.db = True, None
                if self._save(section, each.instance, each.links, each.row):
                    self._saved(section, each.instance, each.links, each.key)
                else:
                    self._failed[section.name].add(each.key)
            return
        for each in pending:
            each.instance._state.adding, each.instance._state.db = False, section.model.objects.db
            self._saved(section, each.instance, each.links, each.key)

    def _validate(self, section: Section, instance, skip: set[str], *, whole: bool, row: _Row) -> None:
        """full_clean(), less the queries this import makes redundant: references were found in the index (no
        existence query per foreign key), natural keys were looked up there, and uniqueness (unique fields and the
        model's Meta.constraints) is enforced by the database when the row is saved in its savepoint, whose refusal
        names the field (no uniqueness query per row). Without `whole` (a reference is missing), only each field
        alone: the model's own rules need the whole row."""
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

    def _key(self, section: Section, data: dict, row: _Row) -> tuple | None:
        parts: list = []
        for name in section.key:
            try:
                if name in section.refs:
                    if data.get(name) is None:
                        raise Invalid(f"Missing '{name}', part of what names each of the {section.name}.")
                    parts.extend(ref_key(section.refs[name].target, data[name]))
                elif name == "a":
                    parts.extend(end_key(data.get(name)))
                else:
                    model_field = section.model._meta.get_field(name)
                    value = convert(model_field, data[name]) if name in data else model_field.get_default()
                    if value in (None, "") and not model_field.blank:
                        raise Invalid(f"Missing '{name}', part of what names each of the {section.name}.")
                    parts.append(value)
            except Invalid as error:
                row.add(name, str(error))
                return None
        return tuple(parts)

    def _plain_values(self, section: Section, data: dict, row: _Row, skip: set[str]) -> dict[str, Any]:
        wanted = {}
        for name in section.plain:
            if name not in data:
                continue
            try:
                wanted[name] = convert(section.model._meta.get_field(name), data[name])
            except Invalid as error:
                row.add(name, str(error))
                skip.add(name)
        return wanted

    def _references(
        self, section: Section, data: dict, row: _Row, skip: set[str], wanted: dict[str, Any]
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
                kind, owner, port = end_key(data[side])  # ("nic", host name, NIC name) or ("switch", name, port)
            except Invalid as error:
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
            key = key or ref_key(target, value)
        except Invalid as error:
            row.add(name, str(error))
            return _MISSING
        if key in self._failed[target]:
            return _BLOCKED
        found = self.keys(target).get(key)
        if found is None:
            row.add(name, f"No {describe(target, key)} in the inventory or earlier in this file.")
            return _MISSING
        return found

    def _links(self, section: Section, data: dict, row: _Row, key: tuple) -> dict[str, set[int]] | None:
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
                target_key = ref_key("tags", value) if name == "tags" else peer_key(value, key[0])
            except Invalid as error:
                row.add(name, str(error))
                continue
            found = self._resolve(target, value, name, row, key=target_key)
            if found is _BLOCKED:
                blocked = True
            elif found is not _MISSING:
                wanted.add(found)
        return None if blocked else {name: wanted}

    def _save(self, section: Section, instance, links: dict[str, set[int]], row: _Row) -> bool:
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
        # SQLite: "UNIQUE constraint failed: table.column"; PostgreSQL names the constraint: "table_column_key".
        sqlite, postgresql = (
            text.endswith(f"{table}.{model_field.column}"),
            f'"{table}_{model_field.column}_key"' in text,
        )
        if model_field.unique and (sqlite or postgresql):
            return model_field.name, f"Another {model._meta.verbose_name} has this {model_field.verbose_name}."
    return None, f"The database refused this row: {cut(text.splitlines()[0], 200) if text else type(error).__name__}."


_BLOCKED = object()  # the target had problems of its own, already reported
_MISSING = object()  # the target could not be found; the row has a problem saying so


def import_inventory(
    *,
    text: str,
    fmt: str,
    user=None,
    dry_run: bool = False,
    progress: Callable[[ImportProgress], None] | None = None,
) -> ImportResult:
    """Create or update the objects in `text` ("json" or "yaml": the export_inventory() document, all sections
    optional; "csv": the export_nodes_csv() columns, hostname required). All or nothing: raises ImportRejected with
    every problem and changes nothing, or saves every row through the audit log as `user`'s import. With dry_run,
    validates and counts the same way, then rolls back. `progress` is called every PROGRESS_EVERY rows and after
    the last, inside the import's transaction (report on another connection); an exception it raises stops the
    import and rolls it back."""
    if fmt not in IMPORT_FORMATS:
        raise ValueError(f"fmt must be one of {', '.join(IMPORT_FORMATS)}, not {fmt!r}")
    text = text.removeprefix("\ufeff")
    if fmt == "csv":
        total, items = csv_items(text)
    else:
        total, items = document_items(*(read_json(text) if fmt == "json" else read_yaml(text)))
    importer = _Importer()
    try:
        with transaction.atomic(), audit_context(source=ChangeSource.IMPORT, user=user):
            importer.run(total, items, progress)
            if not importer.problems:
                # What no one row can judge: each rack-scale domain whole and consistent once every row is in.
                importer.problems += [
                    ImportProblem(problem.section, None, problem.field, problem.message)
                    for problem in domain_problems()
                ]
            if importer.problems:
                raise ImportRejected(importer.problems)
            if dry_run:
                transaction.set_rollback(True)
    except ImportRejected as rejected:
        if fmt == "json":
            lines = json_item_lines(text)
            rejected.problems = [
                replace(p, line=lines.get((p.section, p.item))) if p.line is None and p.item else p
                for p in rejected.problems
            ]
        raise
    importer.result.dry_run = dry_run
    return importer.result
