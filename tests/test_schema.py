"""The OpenAPI schema generates without a warning or an error, for every app's endpoints, and is served."""

import re

import pytest
import yaml
from django.core.management import call_command
from rest_framework.test import APIClient


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
    schema = api_as(viewer).get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    anonymous = APIClient()
    tried = 0
    for path, operations in schema["paths"].items():
        url = re.sub(r"\{[^}]+\}", "00000000-0000-4000-8000-000000000000", path)
        for method, operation in operations.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            response = getattr(anonymous, method)(url, {"name": "x"} if method != "get" else None, format="json")
            tried += 1
            assert response.status_code == 401, (method, path, response.status_code)
            assert "401" in operation["responses"], (method, path, sorted(operation["responses"]))
            assert response["Content-Type"] == "application/json" and set(response.json()) == {"detail"}, (method, path)
    assert tried > 200  # every app's operations, not a few
