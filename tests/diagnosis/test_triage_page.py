"""/diagnosis/triage/: paste or upload a log, see the findings citing lines; bad input says why; nothing is stored."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.parsers.helpers import REAL

URL = "/diagnosis/triage/"
FALLEN = (
    REAL
    / "dmesg-xid"
    / "nvrm-fallen-off-bus-multiline-without-xid-probe-failed-open-570.158.01-nvsentinel-issue155.txt"
).read_text()

pytestmark = pytest.mark.django_db


def test_anonymous_goes_to_login(client):
    response = client.get(URL)
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_a_viewer_sees_the_form_with_the_limit(browser_as, viewer):
    response = browser_as(viewer).get(URL)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="triage-form"' in html and "5.0\xa0MB" in html and 'enctype="multipart/form-data"' in html


def test_pasting_a_log_shows_findings_citing_lines_and_stores_nothing(browser_as, viewer):
    client = browser_as(viewer)
    with CaptureQueriesContext(connection) as queries:
        response = client.post(URL, {"text": FALLEN})

    assert [q["sql"] for q in queries.captured_queries if not q["sql"].lstrip().upper().startswith("SELECT")] == []

    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-problem="gpu_fell_off_bus"' in html
    assert "GPU 0000:b3:00.0" in html
    assert "     1: [ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0" in html
    assert "gpu-lost" in html


def test_an_uploaded_file_is_triaged_under_its_name(browser_as, viewer):
    upload = SimpleUploadedFile("node7-dmesg.txt", FALLEN.encode())
    html = browser_as(viewer).post(URL, {"file": upload}).content.decode()
    assert "<h2>node7-dmesg.txt</h2>" in html and 'data-problem="gpu_fell_off_bus"' in html


def test_an_unrecognised_log_says_so(browser_as, viewer):
    html = browser_as(viewer).post(URL, {"text": "hello\nworld\n"}).content.decode()
    assert "No known problem in 2 lines of pasted log; nothing is guessed" in html
    assert 'id="findings"' not in html


@pytest.mark.parametrize(
    ("data", "errors_id", "fragment"),
    [
        ({"text": "   "}, "text-errors", "is empty"),
        (
            {"file": SimpleUploadedFile("photo.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 10)},
            "file-errors",
            "binary",
        ),
        ({"text": "a", "file": SimpleUploadedFile("a.log", b"b\n")}, "file-errors", "not both"),
    ],
)
def test_bad_input_is_refused_with_a_message(browser_as, viewer, data, errors_id, fragment):
    response = browser_as(viewer).post(URL, data)
    assert response.status_code == 400
    html = response.content.decode()
    assert f'id="{errors_id}"' in html and fragment in html
    assert 'id="triage-result"' not in html


def test_an_oversize_upload_is_refused(browser_as, viewer, settings):
    settings.RACKPILOT_TRIAGE_MAX_BYTES = 1024
    response = browser_as(viewer).post(URL, {"file": SimpleUploadedFile("big.log", b"z" * 2048)})
    assert response.status_code == 400
    assert "big.log is 2048 bytes, over the limit of 1024 bytes." in response.content.decode()


def test_pasted_text_over_the_limit_is_refused(browser_as, viewer, settings):
    settings.RACKPILOT_TRIAGE_MAX_BYTES = 100
    response = browser_as(viewer).post(URL, {"text": "é" * 60})  # 120 bytes of UTF-8
    assert response.status_code == 400
    assert "The pasted log is 120 bytes, over the limit of 100 bytes." in response.content.decode()


def test_the_default_limit_fits_in_a_pasted_form():
    from django.conf import settings

    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE > settings.RACKPILOT_TRIAGE_MAX_BYTES


def test_the_page_shows_the_nic_of_a_port_down_and_the_gpu_of_an_oom(browser_as, viewer):
    ibstat = (REAL / "infiniband" / "gpud-ibstat.47.0.h100.some.down.with.polling.1.txt").read_text()
    oom = (
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 3 has a total "
        "capacity of 23.56 GiB of which 15.88 MiB is free.\n"
    )
    client = browser_as(viewer)
    html = client.post(URL, {"text": ibstat}).content.decode()
    assert 'data-problem="ib_port_down"' in html and "NIC mlx5_11" in html and "fabric-link" in html

    html = client.post(URL, {"text": oom}).content.decode()
    assert 'data-problem="oom"' in html and "rank 3" in html and "GPU 3" in html
