"""The API's pagination: DRF's limit/offset, bounded, and keyset (cursor) pages for long lists.

Limit/offset stays the default, so existing clients see no change: `?limit=100&offset=9000`. A huge `limit` or
`offset` is a clear answer rather than a number the database cannot hold (PostgreSQL's LIMIT and OFFSET are 64-bit),
and a `limit` that is not a positive whole number is refused rather than silently replaced by the default page size.

`?cursor=` (empty for the first page) opts in to keyset pages: the page is the rows after the last one of the
previous page in the list's own order (the queryset's ordering, `?ordering=` included, with the primary key last so
the order is total), found by a WHERE on those columns instead of an OFFSET the database must count through. A deep
page costs what the first does, and a row inserted or deleted while a client walks the list never makes it see
another row twice or miss one that was there all along. The cursor is the last row's ordering values with the
ordering and the list it was made for, encrypted: opaque to clients, who never see a column path or a primary key
(docs/api.md), and a cursor altered on the way is refused before any of its values reach a query. Its `next` link
carries it. There is no `count` and no `previous` in this mode: counting is the cost a deep page must not pay, and a
walk goes forward.
"""

import base64
import datetime
import decimal
import json
import re
import uuid
from functools import reduce
from operator import and_, or_

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import FieldDoesNotExist, FieldError
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import connections
from django.db.models import Q
from django.utils.crypto import salted_hmac
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param

MAX_OFFSET = 2**53  # past any table's length, and below every database's integer limits
CURSOR_PARAM = "cursor"
WHOLE_NUMBER = re.compile(r"-?[0-9]{1,20}")


def _whole_number(request, name: str, *, minimum: int) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    if not WHOLE_NUMBER.fullmatch(raw):  # int() would also take " 5", "1_0" and other scripts' digits
        raise ValidationError({name: ["A whole number is required."]})
    value = int(raw)
    if value < minimum:
        raise ValidationError({name: [f"Ensure this value is at least {minimum}."]})
    if value > MAX_OFFSET:
        raise ValidationError({name: [f"Ensure this value is at most {MAX_OFFSET}."]})
    return value


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    # No page-size cap a client would notice (the job page asks for a whole matrix at once): only the database's.
    max_limit = MAX_OFFSET
    cursor_query_param = CURSOR_PARAM
    cursor_query_description = (
        "Keyset pages: empty for the first page, then the `next` link's value. Deep pages cost what the first does; "
        "no `count` or `previous` in this mode. Without it, pages are limit/offset."
    )

    def paginate_queryset(self, queryset, request, view=None):
        self.cursor_mode = self.cursor_query_param in request.query_params
        if not self.cursor_mode:
            return super().paginate_queryset(queryset, request, view)
        self.request = request
        self.limit = self.get_limit(request)
        self.get_offset(request)  # a cursor page ignores the offset, but a bad one is still refused
        self.ordering = total_ordering(queryset)
        self.made_for = [queryset.model._meta.label, *self.ordering]
        after = decode_cursor(request.query_params[self.cursor_query_param], self.made_for)
        page = queryset.order_by(*self.ordering)
        if after is not None:
            nulls_largest = connections[queryset.db].features.nulls_order_largest
            try:
                page = page.filter(after_row(self.ordering, after, nulls_largest=nulls_largest))
            except (DjangoValidationError, ValueError, TypeError, FieldError):
                raise ValidationError({self.cursor_query_param: ["This cursor does not fit this list."]}) from None
        rows = list(page[: self.limit + 1])
        self.has_next = len(rows) > self.limit
        rows = rows[: self.limit]
        self.next_cursor = encode_cursor(self.made_for, row_values(rows[-1], self.ordering)) if rows else None
        return rows

    def get_paginated_response(self, data):
        if not self.cursor_mode:
            return super().get_paginated_response(data)
        return Response({"next": self.get_next_link(), "results": data})

    def get_next_link(self):
        if not self.cursor_mode:
            return super().get_next_link()
        if not self.has_next:
            return None
        url = remove_query_param(self.request.build_absolute_uri(), self.offset_query_param)
        url = replace_query_param(url, self.limit_query_param, self.limit)
        return replace_query_param(url, self.cursor_query_param, self.next_cursor)

    def get_limit(self, request) -> int | None:
        limit = _whole_number(request, self.limit_query_param, minimum=1)
        return self.default_limit if limit is None else limit

    def get_offset(self, request) -> int:
        return _whole_number(request, self.offset_query_param, minimum=0) or 0

    def get_paginated_response_schema(self, schema):
        answer = super().get_paginated_response_schema(schema)
        answer["required"] = ["results"]
        answer["properties"]["count"]["description"] = "Limit/offset pages only."
        answer["properties"]["previous"]["description"] = "Limit/offset pages only."
        answer["properties"]["next"]["description"] = "The next page; with `cursor=`, a keyset page."
        return answer

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        minimum = {self.limit_query_param: 1, self.offset_query_param: 0}
        for parameter in parameters:
            if parameter["name"] in minimum:
                parameter["schema"].update(minimum=minimum[parameter["name"]], maximum=MAX_OFFSET)
        return [
            *parameters,
            {
                "name": self.cursor_query_param,
                "required": False,
                "in": "query",
                "description": self.cursor_query_description,
                "schema": {"type": "string"},
            },
        ]


def total_ordering(queryset) -> list[str]:
    """The queryset's order as field paths (`-created`, `node__hostname`), the primary key last."""
    query = queryset.query
    ordering = list(query.order_by or (query.get_meta().ordering if query.default_ordering else ()))
    if any(not isinstance(name, str) or name.lstrip("-") in ("?", "") for name in ordering):
        raise ValidationError({CURSOR_PARAM: ["This list's order cannot be paged by cursor; page by offset."]})
    ordering = ["pk" if name == "id" else "-pk" if name == "-id" else name for name in ordering]
    ordering = [column for name in ordering for column in _columns(query.model, name)]
    if "pk" not in ordering and "-pk" not in ordering:
        ordering.append("pk")
    return ordering[: ordering.index("pk") + 1] if "pk" in ordering else ordering[: ordering.index("-pk") + 1]


def _columns(model, name: str, *, depth: int = 0) -> list[str]:
    """The columns `name` orders by, as Django reads it: a relation (`?ordering=site`) orders by the related model's
    own ordering (its name, say), else by its key, with the direction carried through. A cursor holds column values,
    never a related object."""
    descending, path = name.startswith("-"), name.lstrip("-")
    if path == "pk":
        return [name]
    target = model
    try:
        for part in path.split("__"):
            field = target._meta.get_field(part)
            target = field.related_model if field.is_relation else None
            if target is None:
                break
    except FieldDoesNotExist:  # an annotation or a transform: left for the database to judge
        return [name]
    if target is None or not field.is_relation or depth > 3:
        return [name]
    columns = []
    for inner in target._meta.ordering or ["pk"]:
        inner_descending = inner.startswith("-")
        joined = ("-" if descending != inner_descending else "") + f"{path}__{inner.lstrip('-')}"
        columns += _columns(model, joined, depth=depth + 1)
    return columns


def after_row(ordering: list[str], values: list, *, nulls_largest: bool) -> Q:
    """Rows that come after the row with these ordering values: (a > x) or (a = x and b > y) or ... NULLs sort
    where the database puts them (`nulls_largest`: PostgreSQL after every value going up, SQLite before), so cursor
    and offset pages list the rows in one order. The first column's bound is also given alone (a >= x), which the
    database can start an index scan at."""
    terms, equal = [], []
    for name, value in zip(ordering, values, strict=True):
        path, descending = name.lstrip("-"), name.startswith("-")
        nulls_after = nulls_largest != descending
        if value is None:
            beyond = Q(**{f"{path}__isnull": False}) if not nulls_after else Q(pk__in=[])
            same = Q(**{f"{path}__isnull": True})
        else:
            beyond = Q(**{f"{path}__lt" if descending else f"{path}__gt": value})
            if nulls_after:
                beyond |= Q(**{f"{path}__isnull": True})
            same = Q(**{path: value})
        terms.append(reduce(and_, [*equal, beyond]))
        equal.append(same)
    condition = reduce(or_, terms)
    first, value = ordering[0], values[0]
    if value is not None:
        path, descending = first.lstrip("-"), first.startswith("-")
        bound = Q(**{f"{path}__lte" if descending else f"{path}__gte": value})
        if nulls_largest != descending:
            bound |= Q(**{f"{path}__isnull": True})
        condition &= bound
    return condition


def row_values(row, ordering: list[str]) -> list:
    values = []
    for name in ordering:
        value = row
        for part in name.lstrip("-").split("__"):
            value = getattr(value, part, None) if value is not None else None
        values.append(value)
    return values


def _plain(value):
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    return value


def _cipher() -> MultiFernet:
    """Keys of the cursor's own, derived from SECRET_KEY (and its fallbacks, so a rotation does not end a walk)."""
    keys = [
        salted_hmac("rackpilot.cursor", "", secret=secret, algorithm="sha256").digest()
        for secret in (settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS)
    ]
    return MultiFernet([Fernet(base64.urlsafe_b64encode(key)) for key in keys])


def encode_cursor(made_for: list[str], values: list) -> str:
    """`made_for`: the model and the ordering columns; `values`: the last row's, one per column."""
    text = json.dumps({"o": made_for, "v": [_plain(value) for value in values]}, separators=(",", ":"))
    return _cipher().encrypt(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, made_for: list[str]) -> list | None:
    """The values a cursor holds, None for the first page; a 400 naming `cursor` for one this list did not make."""
    if not cursor:
        return None
    try:
        data = json.loads(_cipher().decrypt((cursor + "=" * (-len(cursor) % 4)).encode()))
        values = data["v"]
        if data["o"] != made_for or not isinstance(values, list) or len(values) != len(made_for) - 1:
            raise ValueError
    except (InvalidToken, ValueError, TypeError, KeyError):
        raise ValidationError(
            {CURSOR_PARAM: ["Invalid cursor: give the value of a `next` link of this list, in the same order."]}
        ) from None
    return values
