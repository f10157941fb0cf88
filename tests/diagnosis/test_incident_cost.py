"""An incident's cost on its page and API: its job's work since the last checkpoint, on all its GPUs, counted once
whether it comes from the incident's opening or from a health event on one of the job's nodes."""

from datetime import timedelta

import pytest
from django.urls import reverse

from apps.diagnosis import services
from apps.health import services as health
from apps.health.choices import Severity, Source
from apps.inventory.models import Gpu
from apps.monitoring.models import Slo
from apps.workloads.models import TrainingProgress

pytestmark = pytest.mark.django_db

LOST = 130 * 1.5 * 32 / 3600  # 130 steps past the checkpoint at 1,200 (every 200), 1.5 s each, 4 nodes × 8 ranks


def _xid79_on_gpu002(*, at):
    health.record_event(
        component=Gpu.objects.get(node__hostname="gpu002", index=5),
        source=Source.TELEMETRY,
        kind="xid79",
        severity=Severity.CRITICAL,
        summary="GPU 5: XID 79",
        at=at,
    )


def test_the_incident_shows_its_gpu_hours_lost_once(clock, training_job, api_as, browser_as, operator, viewer):
    now = clock.now
    TrainingProgress.objects.create(job=training_job, step=1330, time=now - timedelta(minutes=1), seconds_per_step=1.5)
    _xid79_on_gpu002(at=now - timedelta(seconds=30))
    gpu002 = Gpu.objects.get(node__hostname="gpu002", index=5).node
    Slo.objects.create(name="rack-util", objective="gpu_utilisation", scope="rack", rack=gpu002.rack, target=85)
    incident = services.open_incident(user=operator, training_job=training_job, title="llm-pretrain stopped")
    cost = api_as(viewer).get(f"/api/incidents/{incident.public_id}/").json()["cost"]
    assert cost["gpu_hours_lost"] == pytest.approx(LOST)
    (loss,) = cost["losses"]
    assert (loss["what"], loss["gpus"], loss["seconds"]) == ("work", 32, 195.0)
    assert cost["slo_budget_burned"] == [
        {"slo": "rack-util", "budget_percent": None, "note": "open under a minute: no step judged yet"}
    ]
    page = browser_as(viewer).get(reverse("incident-detail", args=[incident.public_id])).content.decode()
    assert f'<span id="incident-gpu-hours">{LOST:.1f}</span>' in page
    # Listed once too: the job's loss at the opening and the event's are one (the page listed it twice).
    card = page[page.index('id="incident-cost"') : page.index("</section>", page.index('id="incident-cost"'))]
    assert card.count("<li>") == 1 and "<code>xid79</code>: " in card and f"{LOST:.1f} GPU-hours</li>" in card
    assert 'rack-util <span class="muted">(open under a minute: no step judged yet)</span>' in card
    # The event's own row says the same.
    (event,) = api_as(viewer).get("/api/health-events/").json()["results"]
    assert event["gpu_hours_lost"] == pytest.approx(LOST, abs=0.001)


def test_before_any_health_event_the_page_says_so_not_that_nothing_was_measured(training_job, browser_as, operator):
    # A rehearsal's page opens before its fault's event is recorded: "not measured" read as a broken telemetry.
    incident = services.open_incident(user=operator, training_job=training_job, title="llm-pretrain stopped")

    page = browser_as(operator).get(reverse("incident-detail", args=[incident.public_id])).content.decode()

    assert "SLO budget burned:" in page and "no health event on its nodes yet" in page and "not measured" not in page


def test_one_checkpoints_loss_seen_at_two_steps_counts_its_furthest_in_the_total_and_the_line(
    clock, training_job, browser_as, operator
):
    # The event saw the job 130 steps past its checkpoint; by the incident's opening it had gone on to 190 (a fix
    # between them, a resume from the same checkpoint). One loss, its furthest: the heading said the event's 130 while
    # the only line said the opening's 190.
    now = clock.now
    TrainingProgress.objects.create(job=training_job, step=1330, time=now - timedelta(minutes=5), seconds_per_step=1.5)
    _xid79_on_gpu002(at=now - timedelta(minutes=4))
    TrainingProgress.objects.create(job=training_job, step=1390, time=now - timedelta(minutes=1), seconds_per_step=1.5)
    incident = services.open_incident(user=operator, training_job=training_job, title="llm-pretrain stopped")

    page = browser_as(operator).get(reverse("incident-detail", args=[incident.public_id])).content.decode()

    furthest = 190 * 1.5 * 32 / 3600
    card = page[page.index('id="incident-cost"') : page.index("</section>", page.index('id="incident-cost"'))]
    assert f'<span id="incident-gpu-hours">{furthest:.1f}</span>' in card
    assert card.count("<li>") == 1 and f"{furthest:.1f} GPU-hours</li>" in card and "190 steps" in card
