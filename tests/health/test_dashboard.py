"""The dashboard's first panel, "What is wrong now": open events worst first, grouped by component, each linked to
its evidence."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from apps.health import services
from apps.health.choices import Severity, Source
from tests.factories import make_gpu

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_the_panel_comes_first_and_shows_open_events_worst_first_with_their_evidence(browser_as, viewer):
    gpu = make_gpu(index=2)
    job = uuid.uuid4()
    services.record_event(
        component=gpu.node, source=Source.TRIAGE, kind="nccl_timeout", severity=Severity.MINOR,
        summary="NCCL watchdog timeout on rank 12", at=T0 + timedelta(minutes=3),
    )  # fmt: skip
    services.record_event(
        component=gpu, source=Source.TELEMETRY, kind="xid79", severity=Severity.CRITICAL,
        summary="GPU 2: XID 79, fell off the bus", evidence={"job": str(job), "lines": ["NVRM: Xid 79"]}, at=T0,
    )  # fmt: skip
    cleared = services.record_event(
        component=gpu, source=Source.TELEMETRY, kind="ecc_uncorrectable", severity=Severity.MAJOR,
        summary="GPU 2: 1 uncorrectable ECC error", at=T0,
    )  # fmt: skip
    services.clear_event(event=cleared, by="operator", reason="row remapped", at=T0)

    page = browser_as(viewer).get("/").content.decode()

    panel = page[page.index('id="wrong-now"') : page.index("</section>", page.index('id="wrong-now"'))]
    assert page.index('id="wrong-now"') < page.index('id="fleet-health"')
    assert panel.index("XID 79, fell off the bus") < panel.index("NCCL watchdog timeout")
    assert "uncorrectable ECC" not in panel  # cleared
    assert f'href="{reverse("job-page", args=[job])}"' in panel and "NVRM: Xid 79" in panel
    assert f'href="{reverse("node-detail", args=[gpu.node.public_id])}"' in panel
    assert "1 critical" in panel and "1 minor" in panel and "0 major" in panel


def test_with_nothing_open_the_panel_says_so(browser_as, viewer):
    page = browser_as(viewer).get("/").content.decode()

    assert 'id="wrong-now-empty"' in page


def test_the_node_and_switch_pages_show_their_open_events_and_the_last_cleared(browser_as, viewer):
    from apps.inventory.models import Cable
    from tests.factories import make_nic, make_switch

    nic = make_nic()
    leaf = make_switch()
    cable = Cable.objects.create(a_nic=nic, b_switch=leaf, b_port="swp9", speed_gbps=400, label="C-9")
    services.record_event(
        component=cable, source=Source.SWEEP, kind="link_degraded", severity=Severity.MAJOR,
        summary="link at 200 Gb/s (planned 400 Gb/s)", evidence={"measured_gbps": 200}, at=T0,
    )  # fmt: skip
    old = services.record_event(
        component=nic.node, source=Source.OPERATOR, kind="fan_noise", severity=Severity.INFO, summary="loud fan", at=T0
    )
    services.clear_event(event=old, by="operator", reason="fan replaced", at=T0)
    client = browser_as(viewer)

    node_page = client.get(reverse("node-detail", args=[nic.node.public_id])).content.decode()
    switch_page = client.get(reverse("switch-detail", args=[leaf.public_id])).content.decode()

    for page in (node_page, switch_page):
        section = page[page.index('id="health-events"') :]
        assert "link at 200 Gb/s (planned 400 Gb/s)" in section and 'id="health-state">unhealthy' in section
    assert "fan replaced" in node_page


def test_operators_clear_an_event_from_the_node_page_with_a_reason_and_viewers_may_not(browser_as, viewer, operator):
    from apps.core.models import AuditEntry

    gpu = make_gpu(index=1)
    event = services.record_event(
        component=gpu, source=Source.TELEMETRY, kind="xid79", severity=Severity.CRITICAL, summary="GPU 1: XID 79", at=T0
    )
    url = reverse("health-event-clear", args=[event.public_id])
    node_url = reverse("node-detail", args=[gpu.node.public_id])

    assert url not in browser_as(viewer).get(node_url).content.decode()
    assert browser_as(viewer).post(url, {"reason": "fine"}).status_code == 403
    as_operator = browser_as(operator)
    assert url in as_operator.get(node_url).content.decode()
    refused = as_operator.post(url, {"reason": "  "}, follow=True)
    assert "Not cleared: Reason: This field is required." in refused.content.decode()
    event.refresh_from_db()
    assert event.is_open

    done = as_operator.post(url, {"reason": "GPU reseated"})

    assert done.status_code == 302 and done["Location"] == node_url
    event.refresh_from_db()
    assert (event.is_open, event.cleared_by_user, event.clear_reason) == (False, operator, "GPU reseated")
    entry = AuditEntry.objects.for_object(event).get(action="clear")
    assert (entry.source, entry.actor_name) == ("ui", "operator")
    log = browser_as(operator).get(reverse("audit-log") + "?object_type=health.healthevent").content.decode()
    assert "<td>Cleared</td>" in log and "<td>Updated</td>" not in log  # the clear read "Updated"
