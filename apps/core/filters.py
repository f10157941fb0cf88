"""Filters the apps share: the audit log's, and the check of API lists' query parameters — one the list does not
know, or a single-valued one given twice, is a 400 naming it.

DRF and django-filter ignore both silently: `/api/nodes/?hostname=gpu025` (before nodes had that filter) answered
every node, and `?limit=5&limit=500` took the last value without a word. A client with a typo deserves to hear of it.
"""

import django_filters
from django import forms
from django.core.exceptions import FieldDoesNotExist
from django.db import models
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework.exceptions import ValidationError
from rest_framework.filters import BaseFilterBackend, OrderingFilter, SearchFilter

from apps.core.choices import AuditAction, ChangeSource
from apps.core.forms import UtcDateTimeField
from apps.core.models import AuditEntry

# Always understood: DRF's format suffix and the cursor of cursor pagination (lists may page either way).
ALWAYS_KNOWN = {"format", "cursor"}
PAGINATION_PARAMS = ("limit_query_param", "offset_query_param", "page_query_param", "page_size_query_param")


def _filterset_params(view, queryset) -> tuple[set[str], set[str]]:
    """The filterset's parameter names, and those of them that take several values (`?status=a&status=b`)."""
    filterset_class = DjangoFilterBackend().get_filterset_class(view, queryset)
    if filterset_class is None:
        return set(), set()
    names, multiple = set(), set()
    for name, field in filterset_class(queryset=queryset.none()).form.fields.items():
        widget = field.widget
        # A range filter's widget reads name_min and name_max (django-filter's suffixed multi-widgets).
        suffixes = getattr(widget, "suffixes", None)
        params = [f"{name}_{suffix}" if suffix else name for suffix in suffixes] if suffixes else [name]
        names.update(params)
        if isinstance(widget, forms.SelectMultiple) or isinstance(field, forms.MultipleChoiceField):
            multiple.update(params)
    return names, multiple


def known_parameters(view, queryset) -> tuple[set[str], set[str]]:
    """What a list understands: (every parameter, those that may be repeated)."""
    names, multiple = _filterset_params(view, queryset)
    names |= ALWAYS_KNOWN
    paginator = getattr(view, "paginator", None)
    for attribute in (*PAGINATION_PARAMS, "cursor_query_param"):
        value = getattr(paginator, attribute, None)
        if value:
            names.add(value)
    for backend in view.filter_backends:
        if issubclass(backend, SearchFilter) and getattr(view, "search_fields", None):
            names.add(backend.search_param)
        elif issubclass(backend, OrderingFilter):
            names.add(backend.ordering_param)
    return names, multiple


NAMED_UNKNOWN = 5  # unknown parameters named one by one in a 400; the rest are counted


class KnownQueryParameters(BaseFilterBackend):
    """First of a list's filter backends: refuses what no other backend (nor the paginator) would read."""

    def filter_queryset(self, request, queryset, view):
        if getattr(view, "action", None) != "list":
            return queryset  # a detail, an action: their parameters are their own
        known, multiple = known_parameters(view, queryset)
        errors, unknown = {}, 0
        for name in request.query_params:
            if not name:
                continue  # `?=x` names nothing a client could have meant
            if name not in known:
                unknown += 1
                if unknown <= NAMED_UNKNOWN:  # the answer stays small whatever the URL holds
                    errors[name] = [f"Unknown query parameter; this list takes {', '.join(sorted(known))}."]
            elif name not in multiple and len(request.query_params.getlist(name)) > 1:
                errors[name] = ["Give this parameter once."]
        if unknown > NAMED_UNKNOWN:
            errors["non_field_errors"] = [f"{unknown} unknown query parameters; the first {NAMED_UNKNOWN} are named."]
        if errors:
            raise ValidationError(errors)
        return queryset


class DocumentedSearchFilter(SearchFilter):
    """DRF's search, documented (and known) only on lists that search: elsewhere `?search=` is an unknown parameter,
    and the schema must not offer it."""

    def get_schema_operation_parameters(self, view) -> list:
        return super().get_schema_operation_parameters(view) if getattr(view, "search_fields", None) else []


class ListOrderingFilter(OrderingFilter):
    """DRF's `?ordering=`, strict and stable. A field a list does not order by — its `ordering_fields`, else DRF's
    default, its serializer's model fields, less those a row has no one comparable value of (`one_comparable_value`)
    — is a 400 naming `ordering` and the fields it takes (DRF drops it silently and answers in another order), and the
    schema lists them; whatever order is asked for, the primary key breaks ties, so pages never repeat or skip a row.

    `id` is the object's id as the API shows it, its public id (`public_id` is no name the API shows): the integer
    primary key, which `__all__` would offer as `id`, never leaves the server, not even as an order."""

    def _declared(self, view) -> bool:
        return getattr(view, "ordering_fields", self.ordering_fields) is not None

    def get_valid_fields(self, queryset, view, context=None):
        fields = super().get_valid_fields(queryset, view, context)
        if queryset is None:  # the schema of a view with no class-level queryset: its declared fields, as declared
            return fields
        fields = [(name, label) for name, label in fields if one_comparable_value(queryset, name)]
        return _as_the_api_names_them(fields, queryset.model)

    def get_ordering(self, request, queryset, view):
        given = request.query_params.get(self.ordering_param)
        if given:
            valid = {name for name, _ in self.get_valid_fields(queryset, view, {"request": request})}
            wrong = [term for term in given.split(",") if term.removeprefix("-") not in valid]
            if wrong:
                listed = ", ".join(sorted(valid))
                raise ValidationError(
                    {
                        self.ordering_param: [
                            f"Cannot order by {', '.join(map(repr, wrong))}; this list orders by "
                            f"{listed} (comma-separated, a leading - reverses)."
                        ]
                    }
                )
        ordering = super().get_ordering(request, queryset, view)
        if given and ordering:
            ordering = [_stored(term) for term in ordering]
        return [*ordering, "pk"] if ordering else ordering

    def _schema_fields(self, view) -> list[str] | None:
        queryset = getattr(view, "queryset", None)
        if self._declared(view) and getattr(view, "ordering_fields", None) != "__all__":
            return [name for name, _ in self.get_valid_fields(queryset, view)]
        return None if queryset is None else [name for name, _ in self.get_valid_fields(queryset, view)]

    def get_schema_operation_parameters(self, view) -> list:
        fields = self._schema_fields(view)
        if not fields:
            return super().get_schema_operation_parameters(view)
        return [
            {
                "name": self.ordering_param,
                "required": False,
                "in": "query",
                "description": "Fields to order by, comma-separated; a leading - reverses.",
                "schema": {"type": "array", "items": {"type": "string", "enum": [*fields, *(f"-{f}" for f in fields)]}},
                "style": "form",
                "explode": False,
            }
        ]


PUBLIC_ID = "public_id"  # the model field the API shows as `id`


def _as_the_api_names_them(fields: list[tuple], model) -> list[tuple]:
    """The ordering fields under the names the API shows: the public id as `id`, the primary key not at all."""
    named, seen = [], set()
    for name, label in fields:
        if name in (model._meta.pk.name, "pk"):
            continue
        name = "id" if name == PUBLIC_ID else name
        if name not in seen:
            seen.add(name)
            named.append((name, label))
    return named


def _stored(term: str) -> str:
    """An ordering term as the database orders it: `id` (the API's) is the public id."""
    return term.replace("id", PUBLIC_ID) if term.removeprefix("-") == "id" else term


# Not one value a keyset page (`?cursor=`) can resume after: a JSON document (`?ordering=pfc_priorities` answered its
# own `next` link with "Invalid cursor"), bytes. A many-valued relation is refused too: it lists a row once per
# related object.
NOT_ORDERABLE = (models.JSONField, models.BinaryField)


def one_comparable_value(queryset, name: str) -> bool:
    """Whether a row has one value of `name` (a field path or an annotation) that a list can order and page by."""
    if name in queryset.query.annotations:
        return not isinstance(queryset.query.annotations[name]._output_field_or_none, NOT_ORDERABLE)
    model, field = queryset.model, None
    try:
        for part in name.split("__"):
            if model is None:
                break  # a transform of the field before (a JSON key): judged by that field
            field = model._meta.get_field(part)
            if field.many_to_many or field.one_to_many:
                return False
            model = field.related_model
    except FieldDoesNotExist:
        return True  # a transform or a serializer-only name: DRF's own check judges it
    return not isinstance(field, NOT_ORDERABLE)


class FilterSet(django_filters.FilterSet):
    """A list's filters, shared by its page and its API. Their form's ids are `filter-<field>`: a list page often has
    its own form with a field of the same name (open an incident for a node, inject a fault on one), and two elements
    with one id send a label, and the page's script, to the wrong one. A choice left empty reads "Any <filter>"
    ("Any plane"), where django-filter's reads "---------"; a filter may say its own (`empty_label="Anyone"`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for filter_ in self.filters.values():
            if isinstance(filter_, django_filters.ChoiceFilter) and "empty_label" not in filter_.extra:
                label = str(filter_.label or filter_.field_name)
                filter_.extra["empty_label"] = f"Any {label[:1].lower()}{label[1:]}"
                # A field built before (the schema reads the class's filters) was copied with django-filter's dashes.
                filter_.__dict__.pop("_field", None)

    @property
    def form(self):
        if not hasattr(self, "_form"):
            form_class = self.get_form_class()
            data = (self.data,) if self.is_bound else ()
            self._form = form_class(*data, prefix=self.form_prefix, auto_id="filter-%s")
        return self._form


class UtcDateTimeFilter(django_filters.Filter):
    """A time typed as YYYY-MM-DD HH:MM in UTC (apps.core.forms.UtcDateTimeField)."""

    field_class = UtcDateTimeField


class AuditEntryFilter(FilterSet):
    """The audit log page's and exports' filters."""

    object_type = django_filters.CharFilter(label="Object type")
    object_id = django_filters.CharFilter(label="Object id")
    object = django_filters.CharFilter(field_name="object_repr", lookup_expr="icontains", label="Object")
    actor = django_filters.CharFilter(field_name="actor_name", label="Who")
    source = django_filters.ChoiceFilter(choices=ChangeSource.choices, label="Through", empty_label="Any source")
    action = django_filters.ChoiceFilter(choices=AuditAction.choices, label="Action")
    job = django_filters.UUIDFilter(label="Job")
    since = UtcDateTimeFilter(field_name="created", lookup_expr="gte", label="Since (UTC)")
    until = UtcDateTimeFilter(field_name="created", lookup_expr="lte", label="Until (UTC)")

    class Meta:
        model = AuditEntry
        fields = []
