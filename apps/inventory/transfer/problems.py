"""What an import gives back: its counts, or the problems that rejected it."""

from dataclasses import dataclass, field


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


@dataclass(frozen=True)
class ImportProgress:
    """How far an import is: rows checked (each against the database with the file's earlier rows applied) and
    rows written (created or updated; the rest were unchanged or had problems), of `total` in the file."""

    total: int
    validated: int
    written: int
    section: str

    @property
    def percent(self) -> int:
        return 100 * self.validated // self.total if self.total else 100

    def as_dict(self) -> dict:
        return {
            "total": self.total,
            "validated": self.validated,
            "written": self.written,
            "section": self.section,
            "percent": self.percent,
        }
