"""A JSON body nested past any the API takes is a 400 naming the problem, on every endpoint, never a 500."""

import json

import pytest

from apps.core.parsers import MAX_JSON_DEPTH

pytestmark = pytest.mark.django_db


def nested(levels: int) -> str:
    return '{"name": ' + "[" * levels + "]" * levels + "}"


@pytest.mark.parametrize("path", ["/api/jobs/", "/api/racks/", "/api/sites/", "/api/diagnosis/triage/"])
def test_a_body_nested_940_deep_is_refused(api_as, admin, path):
    response = api_as(admin).post(path, nested(940), content_type="application/json")

    assert response.status_code == 400
    assert f"nested deeper than {MAX_JSON_DEPTH} levels" in json.dumps(response.json())


def test_a_body_within_the_bound_is_read_as_before(api_as, admin):
    response = api_as(admin).post("/api/sites/", nested(MAX_JSON_DEPTH - 2), content_type="application/json")

    assert response.status_code == 400 and "name" in response.json()  # a field error, not a parse error
