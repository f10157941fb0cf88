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

The package reads along the work: `sections` (what the document holds), `export`, `reading` (files into rows, with
their lines), `values` (each value converted for its field), `applying` (rows checked and saved), `problems` (what
callers get back).
"""

from apps.inventory.transfer.applying import import_inventory
from apps.inventory.transfer.export import export_inventory, export_nodes_csv
from apps.inventory.transfer.problems import ImportProblem, ImportProgress, ImportRejected, ImportResult, SectionCounts
from apps.inventory.transfer.sections import (
    CSV_TAG_SEPARATOR,
    DOCUMENT_FORMATS,
    DOCUMENT_VERSION,
    IMPORT_FORMATS,
    NODE_CSV_COLUMNS,
    SECTION_NAMES,
    SECTIONS,
    guess_format,
)

__all__ = [
    "CSV_TAG_SEPARATOR",
    "DOCUMENT_FORMATS",
    "DOCUMENT_VERSION",
    "IMPORT_FORMATS",
    "NODE_CSV_COLUMNS",
    "SECTIONS",
    "SECTION_NAMES",
    "ImportProblem",
    "ImportProgress",
    "ImportRejected",
    "ImportResult",
    "SectionCounts",
    "export_inventory",
    "export_nodes_csv",
    "guess_format",
    "import_inventory",
]
