"""The portal's list pages: sorted by a column (`?sort=hostname`, `?sort=-hostname`), paged with the filters and the
sort kept in every link, and exported as CSV (`?export=csv`): the rows the page shows, in the same order, every page.

A list names its columns once (`Column`): the header the page draws (a link that sorts by it, an arrow on the one
sorted by), the field path or annotation the database sorts on, and the cell the CSV writes. Sorting is an ORDER BY
with the primary key last, so no page repeats or skips a row and a page of 512 nodes costs what an unsorted one did.
A column the list does not have is refused with a message naming the ones it has, and the rows stay in their
default order.
"""

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import F, QuerySet
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import render

from apps.core import csvsafe

SORT_PARAM = "sort"
PAGE_PARAM = "page"
EXPORT_PARAM = "export"
EXPORT_CHUNK = 500  # rows fetched at a time for an export (prefetches included)


@dataclass(frozen=True)
class Column:
    """A list's column: `name` is what `?sort=` and the CSV header say; `order` the field path or annotation sorted on
    (the name if empty; None: the column cannot be sorted); `cell` a row's value in the CSV."""

    name: str
    label: str
    cell: Callable[[Any], Any]
    order: str | None = ""

    @property
    def sortable(self) -> bool:
        return self.order is not None

    @property
    def order_path(self) -> str:
        return self.order or self.name


@dataclass(frozen=True)
class Header:
    label: str
    url: str  # "" where the column cannot be sorted
    arrow: str  # "▲" sorted going up, "▼" going down, "" not sorted by this column


class SortRefused(ValueError):
    pass


def sort_fields(columns: Sequence[Column]) -> list[str]:
    """The field paths a list sorts on: an API list's `ordering_fields` for the same columns."""
    return [column.order_path for column in columns if column.sortable]


def sorted_rows(rows: QuerySet, columns: Sequence[Column], sort: str) -> QuerySet:
    """The rows in the order `sort` names (`name` or `-name` of a sortable column), empty values last either way;
    SortRefused naming the list's columns for any other."""
    name = sort.removeprefix("-")
    column = next((c for c in columns if c.name == name and c.sortable), None)
    if column is None:
        known = ", ".join(c.name for c in columns if c.sortable)
        raise SortRefused(f"This list cannot be sorted by “{sort}”; it sorts by {known} (a leading - reverses).")
    path = F(column.order_path)
    first = path.desc(nulls_last=True) if sort.startswith("-") else path.asc(nulls_last=True)
    return rows.order_by(first, "-pk" if sort.startswith("-") else "pk")


class Listing:
    """One request's view of a list: its sort, its page, its headers and links, its CSV export.

    `rows` are already filtered (a filter that is not valid should pass no rows, as the pages always have; see
    `from_filters`); `default_sort` names a column, as `?sort=` would."""

    filters = None  # the filter set the rows came through (from_filters), shown by the page as `filter`

    def __init__(
        self,
        request,
        rows: QuerySet,
        columns: Sequence[Column],
        *,
        default_sort: str,
        per_page: int,
        filename: str,
    ):
        self.request, self.columns, self.per_page, self.filename = request, columns, per_page, filename
        self.sort = request.GET.get(SORT_PARAM) or default_sort
        self.sort_error = ""
        try:
            self.rows = sorted_rows(rows, columns, self.sort)
        except SortRefused as refused:
            self.sort_error = str(refused)
            self.sort = default_sort
            self.rows = sorted_rows(rows, columns, default_sort)

    @classmethod
    def from_filters(
        cls,
        request,
        filterset_class,
        rows: QuerySet,
        columns: Sequence[Column],
        *,
        auto_id: str = "",
        **options,
    ) -> "Listing":
        """The list of `rows` through the filter set the request's query fills: a filter that is not valid leaves
        no rows (its errors are on the page), never every row as if nothing had been asked. `auto_id` sets the
        filter form's field ids, for a page whose other form has fields of the same names."""
        filters = filterset_class(request.GET, queryset=rows)
        if auto_id:
            filters.form.auto_id = auto_id
        listing = cls(request, filters.qs if filters.is_valid() else rows.none(), columns, **options)
        listing.filters = filters
        return listing

    @property
    def status(self) -> int:
        """The page's HTTP status: 400 when the sort asked for was refused."""
        return 400 if self.sort_error else 200

    @property
    def wants_export(self) -> bool:
        return self.request.GET.get(EXPORT_PARAM) == "csv"

    def _query(self, **changes) -> str:
        query = self.request.GET.copy()
        for name in (PAGE_PARAM, EXPORT_PARAM, *changes):
            query.pop(name, None)
        for name, value in changes.items():
            if value:
                query[name] = value
        return query.urlencode()

    @property
    def query_without_page(self) -> str:
        """The filters and the sort: what a page link adds its page number to."""
        return self._query()

    @property
    def export_url(self) -> str:
        return "?" + self._query(export="csv")

    @property
    def headers(self) -> list[Header]:
        headers = []
        for column in self.columns:
            if not column.sortable:
                headers.append(Header(column.label, "", ""))
                continue
            arrow = "▲" if self.sort == column.name else "▼" if self.sort == f"-{column.name}" else ""
            turned = f"-{column.name}" if self.sort == column.name else column.name
            headers.append(Header(column.label, "?" + self._query(sort=turned), arrow))
        return headers

    def page(self) -> Page:
        return Paginator(self.rows, self.per_page).get_page(self.request.GET.get(PAGE_PARAM))

    def context(self) -> dict:
        """What a list template reads: `listing` (headers, links, the sort error), the page of rows, named as
        Django's ListView names them, and `filter` when the rows came through one."""
        page = self.page()
        context = {
            "listing": self,
            "page_obj": page,
            "paginator": page.paginator,
            "is_paginated": page.has_other_pages(),
            "object_list": page.object_list,
        }
        return context if self.filters is None else context | {"filter": self.filters}

    def respond(
        self,
        template: str,
        extra: dict | Callable[[dict], dict] | None = None,
        *,
        status: int = 200,
        prepare: Callable[[list], Iterable] | None = None,
    ) -> HttpResponse:
        """The CSV export when the request asks for it (`prepare` as export() takes it), else the page: `template`
        with the list's context and `extra` (a dict, or a function of that context for what is worked out from the
        page's rows), answered with the worse of `status` and the list's own."""
        if self.wants_export:
            return self.export(prepare=prepare)
        context = self.context()
        context |= extra(context) if callable(extra) else extra or {}
        return render(self.request, template, context, status=max(status, self.status))

    def export(self, *, prepare: Callable[[list], Iterable] | None = None) -> HttpResponse:
        """Every row of the list, sorted and filtered as shown, as CSV; a refused sort is a 400 saying why.
        `prepare` takes each chunk of rows before its cells are read (to attach what the query cannot join)."""
        if self.sort_error:
            return HttpResponse(self.sort_error, status=400, content_type="text/plain; charset=utf-8")
        header = [column.name for column in self.columns]
        rows = ([column.cell(row) for column in self.columns] for row in self._export_rows(prepare))
        response = StreamingHttpResponse(csv_lines(header, rows), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{self.filename}.csv"'
        return response

    def _export_rows(self, prepare):
        chunk = []
        for row in self.rows.iterator(chunk_size=EXPORT_CHUNK):
            chunk.append(row)
            if len(chunk) == EXPORT_CHUNK:
                yield from prepare(chunk) if prepare else chunk
                chunk = []
        yield from prepare(chunk) if prepare else chunk


def csv_lines(header: Sequence[str], rows: Iterable[Sequence[Any]]):
    """CSV text line by line (for a streaming response), cells a spreadsheet would run escaped (csvsafe)."""
    out = csvsafe.writer(_Echo())
    yield out.writerow(header)
    for row in rows:
        yield out.writerow(row)


class _Echo:
    """A file whose write() hands the line back, for csv.writer to feed a streaming response."""

    def write(self, value):
        return value
