"""The API's operations, and which of them a role is refused, asked of the API itself: a refused operation answers 403
at its role check, before it reads a body or looks an object up (apps/accounts/permissions.py). Used by the refusal
pass (tests/test_schema.py) and to give each role of the API fuzz the operations it may make
(tests/test_api_fuzz.py)."""

import re

from django.db import transaction

METHODS = ("get", "post", "put", "patch", "delete")
# A path parameter no object has: an operation the role may make answers 404 (or 400) at its lookup, not 403.
NO_SUCH_ID = "00000000-0000-4000-8000-000000000000"


def operations(schema: dict) -> list[tuple[str, str]]:
    """(method, path) of every operation of an OpenAPI schema (as JSON or YAML, loaded)."""
    return [(method, path) for path, entries in schema["paths"].items() for method in entries if method in METHODS]


def url_of(path: str) -> str:
    return re.sub(r"\{[^}]+\}", NO_SUCH_ID, path)


def refusals(schema: dict, client) -> dict[tuple[str, str], object]:
    """The operations `client` (an APIClient with a role's credentials) is refused, with their answers. The body is
    JSON that does not parse, so an operation the role may make stops at its body if not at its lookup; and whatever
    it did is rolled back (a job it queued is never sent: that happens on commit)."""
    refused = {}
    with transaction.atomic():
        for method, path in operations(schema):
            if method == "get":
                response = client.get(url_of(path))
            else:
                response = client.generic(method.upper(), url_of(path), "{", content_type="application/json")
            if response.status_code == 403:
                refused[(method, path)] = response
        transaction.set_rollback(True)
    return refused
