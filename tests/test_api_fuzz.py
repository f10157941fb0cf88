"""Schemathesis against the live portal's own OpenAPI schema: no server error, every answer — status, content type,
body — is one the schema documents, every request the schema allows is accepted (but for refusals no schema can state:
tests/schemathesis_hooks.py lists them) and every request it does not allow is refused. Bounded by what it tries, not
by time: one pass over every operation with a fixed seed and a fixed number of examples, the same cases however loaded
the machine. (With --max-time, Schemathesis goes round the operations again until the time is up: what was tried then
depended on the machine's load.)

Each operation is fuzzed once, as the least role that may make it: viewers the reads (and triage), operators the
writes an operator may make, admins the writes only an admin may make. As a role that may not make it, an operation
answers 403 at its role check before it reads anything: tests/test_schema.py checks those refusals in one pass. (Every
role over every operation took twice as long, 145 s against 76 s idle, much of it hearing 403s: of 264 operations, a
viewer is refused 149 and an operator 69.)"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from rest_framework.test import APIClient

from apps.accounts.choices import Role
from apps.accounts.models import User
from tests import api_roles, factories
from tests.live_server import need

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SCHEMATHESIS = Path(sys.executable).with_name("st")
HOOKS = Path(__file__).with_name("schemathesis_hooks.py")
CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_schema_conformance",
        # What the schema refuses, the API refuses; what it allows, the API takes (but for HOOKS' list).
        "negative_data_rejection",
        "schema_valid_input_is_accepted",
    ]
)
# Without a token every operation answers 401 before it reads a body: tests/test_schema.py checks that answer for every
# operation in one pass (Schemathesis took 70-90 s of a test process for it).
EXAMPLES = {Role.VIEWER: 3, Role.OPERATOR: 3, Role.ADMIN: 3}
LADDER = list(EXAMPLES)  # each role may make what the one before it may
# Error feedback has Schemathesis rewrite its generators from the 400s it reads ("A valid number is required."
# turns a decimal string into a number): the requests would no longer be the schema's, which is what is judged.
CONFIG = "[phases.fuzzing]\nerror-feedback = { enabled = false }\n"


@pytest.fixture
def live_server_env():
    # Fuzzed job requests run on the simulator: never commands on the host that runs the tests.
    return {"RACKPILOT_JOB_TRANSPORTS": "sim", "RACKPILOT_JOB_DEFAULT_TRANSPORT": "sim"}


def _token(role: str) -> str:
    username = f"fuzz-{role}"
    user = User.objects.filter(username=username).first() or factories.make_user(role=role, username=username)
    return factories.make_token(user, name="schemathesis")


def _client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def _schema_for(role: str, schema: dict) -> dict:
    """The schema less every operation but those `role` may make and the role before it on the ladder may not."""
    below = LADDER[: LADDER.index(role)]
    allowed = set(api_roles.operations(schema)) - set(api_roles.refusals(schema, _client(_token(role))))
    if below:
        allowed &= set(api_roles.refusals(schema, _client(_token(below[-1]))))
    paths = {}
    for path, entries in schema["paths"].items():
        kept = {key: value for key, value in entries.items() if key not in api_roles.METHODS or (key, path) in allowed}
        if any(key in api_roles.METHODS for key in kept):
            paths[path] = kept
    return {**schema, "paths": paths}


@pytest.mark.parametrize("role", list(EXAMPLES))
def test_schemathesis_finds_no_server_error_and_no_undocumented_answer(demo_cluster, live_server_url, tmp_path, role):
    need(SCHEMATHESIS.exists() or shutil.which("st"), "needs schemathesis (pip install -e .[test])")
    admin = _token(Role.ADMIN)
    token = _token(role)
    served = requests.get(
        f"{live_server_url}/api/schema/",
        headers={"Authorization": f"Token {admin}", "Accept": "application/vnd.oai.openapi+json"},
        timeout=30,
    )
    assert served.status_code == 200
    schema = _schema_for(role, served.json())
    assert len(api_roles.operations(schema)) > 50  # the role's share, not a few
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    (tmp_path / "schemathesis.toml").write_text(CONFIG)
    run = subprocess.run(
        [
            str(SCHEMATHESIS),
            "--config-file",
            str(tmp_path / "schemathesis.toml"),
            "run",
            str(tmp_path / "schema.json"),
            "--url",
            live_server_url,
            "-H",
            f"Authorization: Token {token}",
            "--checks",
            CHECKS,
            "--phases",
            "examples,fuzzing",
            "--max-examples",
            str(EXAMPLES[role]),
            "--seed",
            "20261201",
            "--workers",
            "1",
            "--request-timeout",
            "30",
            # Slow generation for a few tightly-patterned bodies is not a defect of the API.
            "--suppress-health-check",
            "filter_too_much,too_slow",
            "--no-color",
            "--report",
            "ndjson",
            "--report-dir",
            str(tmp_path / "report"),
        ],
        capture_output=True,
        text=True,
        timeout=400,
        cwd=tmp_path,
        env={**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS)},
    )
    (tmp_path / "schemathesis.out").write_text(run.stdout + run.stderr)  # the whole report, beside the NDJSON one
    assert run.returncode == 0, run.stdout[-12000:] + run.stderr[-2000:]
