"""/api/maintenance-windows/ and /remediation/windows/: viewers read and change nothing (403), operators book, end
and delete windows (audited); a bad window is refused naming the field and nothing is saved; the remediation page
shows what was deferred into a window and when it runs. The clock the views read is set by the test."""

import datetime as dt

import pytest
from django.utils import timezone

from apps.core.models import AuditEntry
from apps.health import services as health
from apps.health.choices import Severity, Source
from apps.inventory.models import Gpu, Node, Rack
from apps.remediation import services
from apps.remediation.choices import Action, Mode, Outcome
from apps.remediation.models import MaintenanceWindow, RemediationPolicy

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)
URL = "/api/maintenance-windows/"


@pytest.fixture(autouse=True)
def clock(monkeypatch, demo_cluster):
    monkeypatch.setattr(timezone, "now", lambda: NOW)


def at(hours: float) -> str:
    return (NOW + hours * HOUR).isoformat()


def rack_of(hostname: str) -> Rack:
    return Node.objects.get(hostname=hostname).rack


def body(**fields) -> dict:
    return {"rack": rack_of("gpu005").name, "starts": at(2), "ends": at(6), "reason": "psu swap"} | fields


def test_an_operator_books_a_window_on_a_rack_or_a_node_and_it_is_audited(api_as, operator):
    client = api_as(operator)
    booked = client.post(URL, body(), format="json")
    assert booked.status_code == 201, booked.json()
    answer = booked.json()
    assert (answer["rack"], answer["node"], answer["state"]) == (rack_of("gpu005").name, None, "upcoming")
    window = MaintenanceWindow.objects.get(public_id=answer["id"])
    assert AuditEntry.objects.for_object(window).filter(actor=operator).exists()

    on_node = client.post(URL, body(rack=None, node="gpu006", starts=at(-1), ends=at(1)), format="json")
    assert on_node.status_code == 201 and on_node.json()["state"] == "open"
    assert client.get(URL, {"node": "gpu006"}).json()["count"] == 1


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"node": "gpu005"}, "node"),  # a rack and a node
        ({"rack": None}, "rack"),  # neither
        ({"ends": at(2)}, "ends"),  # ends when it starts
        ({"ends": at(1)}, "ends"),  # before it starts
        ({"ends": at(2 + 7 * 24 + 1)}, "ends"),  # longer than 7 days
        ({"rack": "no-such-rack"}, "rack"),
        ({"rack": None, "node": "gpu999"}, "node"),
        ({"reason": ""}, "reason"),
    ],
)
def test_a_bad_window_is_refused_naming_the_field_and_nothing_is_saved(api_as, operator, fields, field):
    answer = api_as(operator).post(URL, body(**fields), format="json")
    assert answer.status_code == 400 and list(answer.json()) == [field], answer.json()
    assert not MaintenanceWindow.objects.exists()


def test_every_bad_field_of_a_window_is_named_at_once(api_as, browser_as, operator):
    """A rack or reason refused by its shape no longer hides the window's own rules (it ends before it starts)."""
    answer = api_as(operator).post(URL, body(rack="no-such-rack", ends=at(1), reason=""), format="json")
    assert answer.status_code == 400 and set(answer.json()) == {"rack", "ends", "reason"}, answer.json()
    assert "no-such-rack" in str(answer.json()["rack"])

    form = {"rack": "not-an-id", "starts": "2026-12-02T08:00", "ends": "2026-12-02T07:00", "reason": "cabling"}
    page = browser_as(operator).post("/remediation/windows/", form)
    assert page.status_code == 400 and set(page.context["form"].errors) == {"rack", "ends"}, page.context["form"].errors
    assert not MaintenanceWindow.objects.exists()


def test_a_viewer_reads_windows_but_cannot_book_end_or_delete_them(api_as, viewer, operator):
    window = MaintenanceWindow.objects.create(
        rack=rack_of("gpu005"), starts=NOW - HOUR, ends=NOW + HOUR, reason="psu swap"
    )
    client = api_as(viewer)
    listed = client.get(URL)
    assert listed.status_code == 200 and [row["id"] for row in listed.json()["results"]] == [str(window.public_id)]
    assert client.post(URL, body(), format="json").status_code == 403
    assert client.post(f"{URL}{window.public_id}/end/").status_code == 403
    assert client.delete(f"{URL}{window.public_id}/").status_code == 403
    window.refresh_from_db()
    assert window.ends == NOW + HOUR and MaintenanceWindow.objects.count() == 1


def test_an_operator_ends_an_open_window_now_and_deletes_an_upcoming_one(api_as, operator):
    client = api_as(operator)
    open_ = MaintenanceWindow.objects.create(rack=rack_of("gpu005"), starts=NOW - HOUR, ends=NOW + HOUR, reason="a")
    upcoming = MaintenanceWindow.objects.create(
        rack=rack_of("gpu005"), starts=NOW + HOUR, ends=NOW + 2 * HOUR, reason="b"
    )
    ended = client.post(f"{URL}{open_.public_id}/end/")
    assert ended.status_code == 200 and ended.json()["state"] == "past"
    open_.refresh_from_db()
    assert open_.ends == NOW and AuditEntry.objects.for_object(open_).filter(actor=operator).count() == 1
    not_open = client.post(f"{URL}{upcoming.public_id}/end/")
    assert not_open.status_code == 400 and list(not_open.json()) == ["window"]
    assert client.delete(f"{URL}{upcoming.public_id}/").status_code == 204
    assert not MaintenanceWindow.objects.filter(pk=upcoming.pk).exists()
    assert AuditEntry.objects.filter(object_repr__contains=": b", actor=operator).exists()


def test_the_page_lists_windows_and_books_one_for_operators_only(browser_as, viewer, operator, make_user):
    MaintenanceWindow.objects.create(rack=rack_of("gpu005"), starts=NOW + HOUR, ends=NOW + 2 * HOUR, reason="psu swap")
    MaintenanceWindow.objects.create(node=Node.objects.get(hostname="gpu006"), starts=NOW - HOUR, ends=NOW + HOUR,
                                     reason="reseat")  # fmt: skip
    page = browser_as(viewer).get("/remediation/windows/")
    text = page.content.decode()
    assert page.status_code == 200 and "psu swap" in text and "reseat" in text
    assert 'id="window-form"' not in text and "End now" not in text
    rack = rack_of("gpu005")
    form = {"rack": str(rack.public_id), "starts": "2026-12-02T08:00", "ends": "2026-12-02T12:00", "reason": "cabling"}
    assert browser_as(viewer).post("/remediation/windows/", form).status_code == 403
    assert not MaintenanceWindow.objects.filter(reason="cabling").exists()

    client = browser_as(operator)
    assert 'id="window-form"' in client.get("/remediation/windows/").content.decode()
    both = client.post("/remediation/windows/", form | {"node": str(Node.objects.get(hostname="gpu005").public_id)})
    assert both.status_code == 400 and "not both" in both.content.decode()
    assert not MaintenanceWindow.objects.filter(reason="cabling").exists()
    assert client.post("/remediation/windows/", form).status_code == 302
    window = MaintenanceWindow.objects.get(reason="cabling")
    assert window.rack == rack and AuditEntry.objects.for_object(window).filter(actor=operator).exists()
    deleted = client.post(f"/remediation/windows/{window.public_id}/delete/")
    assert deleted.status_code == 302 and not MaintenanceWindow.objects.filter(reason="cabling").exists()
    assert browser_as(viewer).post(f"/remediation/windows/{window.public_id}/delete/").status_code == 403


@pytest.mark.parametrize("starts", ["2026-12-02 08:00", "2026-12-02 08:00:00", "2026-12-02T08:00"])
def test_the_page_books_a_window_at_a_utc_time_typed_as_text(browser_as, operator, settings, starts):
    """A text field, "YYYY-MM-DD HH:MM" in UTC as its label says: the browser's datetime-local picker showed its own
    locale's format and no time zone."""
    settings.TIME_ZONE = "Europe/Berlin"  # the form reads UTC whatever the portal's zone
    client = browser_as(operator)
    page = client.get("/remediation/windows/").content.decode()
    assert "Starts (UTC)" in page and 'placeholder="YYYY-MM-DD HH:MM"' in page and "datetime-local" not in page
    form = {"rack": str(rack_of("gpu005").public_id), "starts": starts, "ends": "2026-12-02 12:30", "reason": "cabling"}

    assert client.post("/remediation/windows/", form).status_code == 302

    window = MaintenanceWindow.objects.get(reason="cabling")
    assert (window.starts, window.ends) == (NOW + 20 * HOUR, NOW + 24.5 * HOUR)


def test_a_start_that_does_not_read_is_a_form_error_naming_it_and_nothing_is_saved(browser_as, operator):
    form = {"rack": str(rack_of("gpu005").public_id), "starts": "12/02/2026 08:00 AM", "ends": "2026-12-02 12:00"}

    page = browser_as(operator).post("/remediation/windows/", form | {"reason": "cabling"})

    assert page.status_code == 400 and list(page.context["form"].errors) == ["starts"]
    assert '<span class="error">Write a UTC time as YYYY-MM-DD HH:MM' in page.content.decode()  # beside "Starts (UTC)"
    assert not MaintenanceWindow.objects.exists()


def test_the_remediation_page_shows_a_deferred_action_and_when_it_runs(browser_as, viewer, settings, api_as):
    settings.RACKPILOT_SCHEDULER_KIND = "slurm"
    RemediationPolicy.objects.all().delete()
    RemediationPolicy.objects.create(
        name="ecc", kind_pattern="ecc_uncorrectable", min_severity=Severity.MINOR, action=Action.QUARANTINE,
        mode=Mode.ON,
    )  # fmt: skip
    window = MaintenanceWindow.objects.create(
        rack=rack_of("gpu005"), starts=NOW + 10 * HOUR, ends=NOW + 12 * HOUR, reason="psu swap"
    )
    health.record_event(
        component=Gpu.objects.get(node__hostname="gpu005", index=2), source=Source.TELEMETRY,
        kind="ecc_uncorrectable", severity=Severity.MAJOR, summary="GPU 2: uncorrectable ECC errors", at=NOW,
    )  # fmt: skip
    (decision,) = services.evaluate(now=NOW, transport="sim", queue=False)
    assert decision.outcome == Outcome.DEFERRED
    page = browser_as(viewer).get("/remediation/")
    text = page.content.decode()
    assert page.status_code == 200 and 'id="waiting"' in text and 'id="windows-link"' in text
    assert "Deferred into a maintenance window (runs at 2026-12-01 22:00)" in text
    # The API says the same: the window and when the action runs.
    row = api_as(viewer).get(f"/api/remediation-decisions/{decision.public_id}/").json()
    assert (row["outcome"], row["window"], row["act_at"]) == ("deferred", str(window.public_id), "2026-12-01T22:00:00Z")
    assert api_as(viewer).get(f"{URL}{window.public_id}/").json()["deferred_decisions"] == [str(decision.public_id)]
