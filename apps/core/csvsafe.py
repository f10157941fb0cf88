"""CSV that a spreadsheet opens as data: every CSV export in the tree writes through `writer()`.

A cell starting with `=`, `+`, `-`, `@`, a tab or a carriage return is read by spreadsheets as a formula (OWASP "CSV
injection"); such a cell is written with a leading single quote, which spreadsheets show as text. `unescape()` takes
the quote off again when such a file is imported back.
"""

import csv
from typing import Any

FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")


def escape(value: Any) -> Any:
    """The cell as written: text that a spreadsheet would run gets a leading `'`; numbers and other text as is."""
    if isinstance(value, str) and value.startswith(FORMULA_LEADS):
        return "'" + value
    return value


def unescape(cell: str) -> str:
    """A cell as escape() wrote it, read back: `'=1+2` -> `=1+2`; any other cell as is."""
    if cell.startswith("'") and cell[1:].startswith(FORMULA_LEADS):
        return cell[1:]
    return cell


class _EscapingWriter:
    def __init__(self, out, **options):
        self._writer = csv.writer(out, **options)

    def writerow(self, row) -> Any:
        return self._writer.writerow([escape(cell) for cell in row])

    def writerows(self, rows) -> None:
        for row in rows:
            self.writerow(row)


def writer(out, **options) -> _EscapingWriter:
    """csv.writer(out, **options), escaping cells a spreadsheet would run as formulas."""
    return _EscapingWriter(out, **options)
