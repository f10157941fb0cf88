"""Schemathesis against the live portal's own OpenAPI schema, as each role: no server error, every answer — status,
content type, body — is one the schema documents, every request the schema allows is accepted (but for refusals no
schema can state: tests/schemathesis_hooks.py lists them) and every request it does not allow is refused. Bounded by
what it tries, not by time: one pass over every operation with a fixed seed and a fixed number of examples, the same
cases however loaded the machine. (With --max-time, Schemathesis goes round the operations again until the time is
up: what was tried then depended on the machine's load.)"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from apps.accounts.choices import Role
from apps.accounts.models import User
from tests import factories
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


@pytest.mark.parametrize("role", list(EXAMPLES))
def test_schemathesis_finds_no_server_error_and_no_undocumented_answer(demo_cluster, live_server_url, tmp_path, role):
    need(SCHEMATHESIS.exists() or shutil.which("st"), "needs schemathesis (pip install -e .[test])")
    admin = _token(Role.ADMIN)
    token = _token(role)
    schema = requests.get(f"{live_server_url}/api/schema/", headers={"Authorization": f"Token {admin}"}, timeout=30)
    assert schema.status_code == 200
    (tmp_path / "schema.yaml").write_bytes(schema.content)
    (tmp_path / "schemathesis.toml").write_text(CONFIG)
    run = subprocess.run(
        [
            str(SCHEMATHESIS),
            "--config-file",
            str(tmp_path / "schemathesis.toml"),
            "run",
            str(tmp_path / "schema.yaml"),
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
