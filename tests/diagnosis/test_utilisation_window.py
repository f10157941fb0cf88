"""Runbook 2's sampling window: a runbook parameter (10-600 s, default 60 s so that a 20 s loader period repeats 3
times in it), refused out of bounds or on another runbook with nothing made, kept for the re-check, shown on the
incident page."""

import pytest
from django.urls import reverse

from apps.diagnosis import services, utilisation
from apps.diagnosis.choices import Cause, EvidenceVerdict
from apps.diagnosis.models import Incident
from apps.diagnosis.phases import Phase
from apps.jobs.models import Job


def _diagnose(training_job, operator, run_phase, **window):
    incident = services.open_incident(
        user=operator, training_job=training_job, transport="sim", runbook="gpu-utilisation"
    )
    services.start_runbook(incident=incident, user=operator, **window)
    run_phase(incident, Phase.SAMPLE)
    return incident


@pytest.mark.django_db(transaction=True)
def test_the_default_window_catches_a_20_s_loader_period_that_30_s_misses(training_job, inject, operator, run_phase):
    inject("gpu002", "dataloader_stall", period_s=20, stall_pct=40)
    short = _diagnose(training_job, operator, run_phase, sample_seconds=30)
    assert short.jobs.get().parameters["sample_seconds"] == 30
    assert short.evidence.get(topic="dips").verdict != EvidenceVerdict.FAULT and short.cause != Cause.DATALOADER_STALL
    assert "over 30 s" in short.evidence.filter(topic="series").first().summary
    default = _diagnose(training_job, operator, run_phase)
    assert default.jobs.get().parameters["sample_seconds"] == utilisation.WINDOW_S == 60
    assert default.cause == Cause.DATALOADER_STALL
    dips = default.evidence.get(topic="dips")
    assert dips.verdict == EvidenceVerdict.FAULT and dips.data["period_s"] == pytest.approx(20.0, abs=1.0)


@pytest.mark.django_db(transaction=True)
def test_the_re_check_samples_as_long_as_the_diagnosis(training_job, inject, operator, run_phase, client):
    inject("gpu002", "power_cap", "3", watts=450)
    incident = _diagnose(training_job, operator, run_phase, sample_seconds=15)
    client.force_login(operator)
    page = client.get(reverse("incident-detail", args=[incident.public_id])).content.decode()
    assert '<span id="sample-window">GPUs sampled over 15 s</span>' in page
    services.approve_remediation(remediation=incident.remediations.get(), user=operator)
    run_phase(incident, Phase.FIX)
    verify = run_phase(incident, Phase.VERIFY)
    assert verify.parameters["sample_seconds"] == 15
    assert "over 15 s" in incident.evidence.filter(job=verify, topic="series").first().summary


@pytest.mark.django_db
def test_the_api_takes_the_window_and_refuses_it_out_of_bounds_or_on_another_runbook(training_job, api_as, operator):
    client = api_as(operator)
    body = {"training_job": str(training_job.public_id), "runbook": "gpu-utilisation"}
    for refused in (
        {**body, "sample_seconds": 9},
        {**body, "sample_seconds": 601},
        {**body, "sample_seconds": "long"},
        {**body, "runbook": "nccl-timeout", "sample_seconds": 60},
    ):
        answer = client.post("/api/incidents/", refused, format="json")
        assert answer.status_code == 400 and list(answer.json()) == ["sample_seconds"], refused
    assert not Incident.objects.exists() and not Job.objects.exists()
    opened = client.post("/api/incidents/", {**body, "sample_seconds": 120}, format="json")
    assert opened.status_code == 201
    assert Job.objects.get().parameters["sample_seconds"] == 120


@pytest.mark.django_db
def test_the_service_and_the_page_refuse_a_bad_window_with_nothing_started(training_job, browser_as, operator):
    incident = services.open_incident(user=operator, training_job=training_job, runbook="gpu-utilisation")
    with pytest.raises(services.IncidentError) as error:
        services.start_runbook(incident=incident, user=operator, sample_seconds=5)
    assert error.value.field == "sample_seconds" and not Job.objects.exists()
    incident.delete()
    form = {"training_job": str(training_job.public_id), "transport": "sim", "runbook": "gpu-utilisation"}
    refused = browser_as(operator).post(reverse("incident-open"), {**form, "sample_seconds": "700"})
    assert refused.status_code == 400 and 'id="sample_seconds-errors"' in refused.content.decode()
    assert not Incident.objects.exists() and not Job.objects.exists()
