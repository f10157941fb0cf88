"""The schema says what the API answers: a field reading a nullable foreign key (`approved_by`, `decided_by` ...) is
nullable, and a read-only choice the model leaves blank has "" among its values. Checked over every model
serializer of every app, so a new one cannot drift."""

import importlib
import inspect

import pytest
from django.apps import apps as django_apps
from django.core.exceptions import FieldDoesNotExist
from django.db import models
from rest_framework import serializers


def _model_serializers():
    found = {}
    for config in django_apps.get_app_configs():
        if not config.name.startswith("apps."):
            continue
        try:
            module = importlib.import_module(f"{config.name}.api.serializers")
        except ModuleNotFoundError:
            continue
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, serializers.ModelSerializer) and cls.__module__ == module.__name__:
                found[f"{cls.__module__}.{cls.__name__}"] = cls
    return found


def _model_field(model, source: str):
    """The model field a (dotted) source starts from: `approved_by.username` reads `approved_by`."""
    try:
        return model._meta.get_field(source.split(".")[0])
    except FieldDoesNotExist:
        return None


def _problems(cls) -> list[str]:
    instance = cls()
    model = cls.Meta.model
    problems = []
    for name, field in instance.fields.items():
        if isinstance(field, serializers.ListSerializer | serializers.ManyRelatedField) or field.source == "*":
            continue
        model_field = _model_field(model, field.source)
        if model_field is None:
            continue
        if isinstance(model_field, models.ForeignKey) and model_field.null and not field.allow_null:
            problems.append(f"{name}: reads the nullable {model_field.name} but is not nullable")
        if (
            isinstance(field, serializers.ChoiceField)
            and model_field.choices
            and model_field.blank
            and "" not in field.choices
            and not field.allow_blank
        ):
            problems.append(f"{name}: the model leaves it blank but the enum has no ''")
    return problems


SERIALIZERS = {path: cls for path, cls in _model_serializers().items() if hasattr(getattr(cls, "Meta", None), "model")}


@pytest.mark.parametrize("path", sorted(SERIALIZERS))
def test_fields_say_null_and_blank_where_the_model_allows_them(path):
    assert _problems(SERIALIZERS[path]) == []


def _answer_schema(schema, path, method="get", code="200"):
    return schema["paths"][path][method]["responses"][code]["content"]["application/json"]["schema"]


def test_only_views_that_page_their_answer_are_documented_as_pages():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)

    # These answer a plain array (Response(serializer.data)): the schema said a page object.
    plain = ("/api/deployments/{id}/verdicts/", "/api/deployments/{id}/approvals/", "/api/bmcs/{public_id}/readings/")
    for path in plain:
        assert _answer_schema(schema, path)["type"] == "array", path
    # These page (paginate_queryset), as the lists do.
    for path in ("/api/jobs/{id}/steps/", "/api/benchmarks/{id}/results/", "/api/nodes/"):
        assert _answer_schema(schema, path)["$ref"].rsplit("/", 1)[-1].startswith("Paginated"), path
