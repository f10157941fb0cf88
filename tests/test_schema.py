"""The OpenAPI schema generates without a warning or an error, for every app's endpoints, and is served."""

import pytest
import yaml
from django.core.management import call_command
from rest_framework.test import APIClient

from tests import api_roles


def test_the_schema_generates_and_validates_without_warnings(tmp_path):
    target = tmp_path / "schema.yaml"
    # --fail-on-warn turns every drf-spectacular warning or error into a failure; --validate checks it is OpenAPI 3.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target))
    schema = yaml.safe_load(target.read_text())
    assert schema["openapi"].startswith("3.")
    assert "/api/nodes/{public_id}/" in schema["paths"]


@pytest.mark.django_db
def test_the_schema_is_served(api_as, viewer):
    response = api_as(viewer).get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    assert response.json()["info"]["title"] == "Rackpilot API"


@pytest.mark.django_db
def test_the_schema_and_its_docs_page_are_for_signed_in_users_only(client):
    assert client.get("/api/schema/").status_code == 401
    assert client.get("/api/docs/").status_code == 401


def test_the_schema_is_generated_once_per_process(api_as, viewer, monkeypatch):
    from drf_spectacular.generators import SchemaGenerator

    from apps.core.schema import SchemaView

    monkeypatch.setattr(SchemaView, "_generated", {})
    calls = []
    generate = SchemaGenerator.get_schema
    monkeypatch.setattr(SchemaGenerator, "get_schema", lambda self, **kw: calls.append(1) or generate(self, **kw))
    client = api_as(viewer)
    first = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    second = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    yaml_answer = client.get("/api/schema/")
    assert first.status_code == second.status_code == yaml_answer.status_code == 200
    assert first.content == second.content and b"/api/nodes/{public_id}/" in yaml_answer.content
    assert len(calls) == 1


@pytest.mark.django_db
def test_the_docs_page_links_back_to_the_portal(api_as, viewer):
    """Swagger UI, opened from the portal's menu, was a page with no way back."""
    page = api_as(viewer).get("/api/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'href="/"' in html and "Back to the portal" in html
    assert 'id="swagger-ui"' in html  # the package's page, still whole beneath the bar


@pytest.mark.django_db
def test_without_credentials_every_operation_answers_its_documented_401(api_as, viewer):
    """What the API fuzz tried without a token (tests/test_api_fuzz.py), in one pass here: every operation answers 401
    before it reads a body or looks an object up, with the JSON body its schema documents for 401."""
    schema = _schema(api_as(viewer))
    anonymous = APIClient()
    for method, path in api_roles.operations(schema):
        url = api_roles.url_of(path)
        response = getattr(anonymous, method)(url, {"name": "x"} if method != "get" else None, format="json")
        assert response.status_code == 401, (method, path, response.status_code)
        _assert_documented(schema, method, path, response)
    assert len(api_roles.operations(schema)) > 200  # every app's operations, not a few


@pytest.mark.django_db
def test_each_role_is_refused_what_its_role_may_not_do_with_its_documented_403(api_as, viewer, operator, admin):
    """What the API fuzz tried as a role that may not make an operation (tests/test_api_fuzz.py), in one pass here:
    viewers read, and make one write, triage, which stores nothing; operators are refused the inventory's changes (an
    admin's), nothing else; admins are refused nothing. Each refusal is a 403 that the operation documents, with the
    JSON body documented for it, given before the body is read."""
    schema = _schema(api_as(viewer))
    writes = {(method, path) for method, path in api_roles.operations(schema) if method != "get"}
    refused = {
        role: api_roles.refusals(schema, api_as(user))
        for role, user in [("viewer", viewer), ("operator", operator), ("admin", admin)]
    }

    assert set(refused["viewer"]) == writes - {("post", "/api/diagnosis/triage/")}
    assert set(refused["operator"]) < set(refused["viewer"])
    assert ("post", "/api/nodes/") in refused["operator"] and ("post", "/api/jobs/") not in refused["operator"]
    assert refused["admin"] == {}
    for answers in refused.values():
        for (method, path), response in answers.items():
            _assert_documented(schema, method, path, response)


def _schema(client) -> dict:
    return client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()


def _assert_documented(schema: dict, method: str, path: str, response) -> None:
    code = str(response.status_code)
    assert code in schema["paths"][path][method]["responses"], (method, path, code)
    assert response["Content-Type"] == "application/json" and set(response.json()) == {"detail"}, (method, path)
