"""POST /api/diagnosis/triage/: JSON text or a multipart file → findings; bad input → 400 naming the field."""

from urllib.parse import urlencode

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.parsers.helpers import REAL

URL = "/api/diagnosis/triage/"
WATCHDOG = (
    REAL / "pytorch-nccl" / "watchdog-reduce-scatter-base-timeout-multirank-pg1-llamafactory-issue6269-partial.txt"
).read_text()

pytestmark = pytest.mark.django_db


def test_anonymous_is_refused(api_client):
    assert api_client.post(URL, {"text": WATCHDOG}, format="json").status_code == 401


def test_a_viewer_triages_pasted_text(api_as, viewer):
    client = api_as(viewer)
    with CaptureQueriesContext(connection) as queries:
        response = client.post(URL, {"text": WATCHDOG}, format="json")

    assert [q["sql"] for q in queries.captured_queries if not q["sql"].lstrip().upper().startswith("SELECT")] == []

    assert response.status_code == 200
    data = response.json()
    assert data["recognised"] is True and data["source"] == "pasted log" and data["lines"] == 5
    assert [(f["problem"], f["rank"], f["lines"]) for f in data["findings"]] == [
        ("nccl_watchdog_timeout", 0, [1, 2]),
        ("nccl_watchdog_timeout", 4, [3, 4]),
        ("nccl_watchdog_timeout", 3, [5]),
    ]
    assert data["findings"][0]["runbook"] == "nccl-timeout"


def test_an_uploaded_file_is_triaged_under_its_name(api_as, operator):
    path = (
        REAL
        / "k8s"
        / "nvidia-device-plugin-log-xidcriticalerror-xid69-device-marked-unhealthy-k8s-device-plugin-issue189.txt"
    )
    upload = SimpleUploadedFile("plugin.log", path.read_bytes(), content_type="text/plain")

    response = api_as(operator).post(URL, {"file": upload}, format="multipart")

    assert response.status_code == 200
    (finding,) = response.json()["findings"]
    assert (finding["source"], finding["problem"], finding["xid"]) == ("plugin.log", "xid", 69)
    assert finding["xid_name"] == "Graphics Engine class error"


def test_an_unrecognised_log_answers_200_with_no_findings(api_as, viewer):
    response = api_as(viewer).post(URL, {"text": "epoch 1 loss 2.3\nepoch 2 loss 2.1\n"}, format="json")
    assert response.status_code == 200
    assert response.json()["findings"] == [] and "nothing is guessed" in response.json()["message"]


@pytest.mark.parametrize(
    ("payload", "format_", "field", "fragment"),
    [
        ({"text": "  \n "}, "json", "text", "empty"),
        ({}, "json", "text", "Send the log"),
        ({"text": 42}, "json", "text", "Send the log"),
        ({"text": "a\x00b"}, "json", "text", "binary"),
        ({"file": SimpleUploadedFile("core.bin", b"\x7fELF\x02\x01\x01\x00" * 64)}, "multipart", "file", "binary"),
        ({"file": SimpleUploadedFile("empty.log", b"")}, "multipart", "file", "empty"),
        (
            {
                "text": "OSError: [Errno 28] No space left on device",
                "file": SimpleUploadedFile("a.log", b"OSError: [Errno 28] No space left on device\n"),
            },
            "multipart",
            "file",
            "not both",
        ),
    ],
)
def test_bad_input_is_400_naming_the_field(api_as, viewer, payload, format_, field, fragment):
    response = api_as(viewer).post(URL, payload, format=format_)
    assert response.status_code == 400, response.content
    assert fragment in response.json()[field][0]


def test_oversize_text_and_file_are_refused(api_as, viewer, settings):
    settings.RACKPILOT_TRIAGE_MAX_BYTES = 100
    client = api_as(viewer)

    text = client.post(URL, {"text": "x" * 101}, format="json")
    upload = client.post(URL, {"file": SimpleUploadedFile("big.log", b"y\n" * 51)}, format="multipart")

    assert text.status_code == upload.status_code == 400
    assert "over the limit of 100 bytes" in text.json()["text"][0]
    assert "big.log is 102 bytes, over the limit of 100 bytes" in upload.json()["file"][0]


def test_get_is_not_allowed(api_as, viewer):
    assert api_as(viewer).get(URL).status_code == 405


def test_the_schema_types_the_triage_response():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    operation = schema["paths"][URL]["post"]
    assert set(operation["requestBody"]["content"]) == {"application/json", "multipart/form-data"}
    assert operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/TriageResult")
    finding = schema["components"]["schemas"]["Finding"]["properties"]
    assert {"problem", "lines", "excerpt", "rank", "node", "gpu", "nic", "xid", "runbook"} <= set(finding)


def test_an_oversized_body_is_refused_before_it_is_read(api_as, viewer, settings):
    settings.RACKPILOT_TRIAGE_MAX_BYTES = 10
    body = b'{"text": "' + b"x" * (70 << 10) + b'"}'

    response = api_as(viewer).generic("POST", URL, body, content_type="application/json")

    assert response.status_code == 400
    assert response.json()["text"] == [f"The request is {len(body)} bytes; a log may be at most 10 bytes."]


@pytest.mark.parametrize("encoding", ["multipart", "json", "form"])
def test_text_over_what_a_request_may_carry_is_refused_naming_the_field(api_as, viewer, settings, encoding):
    settings.RACKPILOT_TRIAGE_MAX_BYTES = 200 << 10
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100 << 10  # the pasted text is past Django's limit, under triage's
    text = "NCCL WARN x\n" * (12 << 10)
    client = api_as(viewer)

    if encoding == "multipart":
        response = client.post(URL, {"text": text}, format="multipart")
    elif encoding == "form":
        response = client.generic(
            "POST", URL, urlencode({"text": text}), content_type="application/x-www-form-urlencoded"
        )
    else:
        response = client.post(URL, {"text": text}, format="json")

    assert response.status_code == 400
    assert list(response.json()) == ["text"], response.json()
