"""Runbook 1 end to end on the simulator: each fault gives its branch, its conclusion and its fix."""

import pytest

from apps.diagnosis import services
from apps.diagnosis.choices import Cause, IncidentState, RemediationState
from apps.diagnosis.phases import Phase


def _run_phase(incident, run_shards, phase):
    job = incident.jobs.filter(parameters__phase=phase).order_by("-created").first()
    assert job is not None, f"no {phase} job was started"
    run_shards(job)
    incident.refresh_from_db()
    return job


@pytest.mark.django_db(transaction=True)
def test_pfc_off_is_found_fixed_and_resolved(training_job, inject, age_changes, operator, run_shards, settings):
    settings.RACKPILOT_DIAGNOSIS_VERIFY_WAIT_SECONDS = 0
    inject("gpu003", "pfc_off", "3")
    incident = services.open_incident(user=operator, training_job=training_job, transport="sim")
    services.start_runbook(incident=incident, user=operator)
    _run_phase(incident, run_shards, Phase.LOG)
    assert list(incident.suspect_nodes.values_list("hostname", flat=True)) == ["gpu003"]
    assert "timed out in ALLREDUCE" in incident.symptom
    _run_phase(incident, run_shards, Phase.NETWORK)
    assert incident.state == IncidentState.CONCLUDED
    assert incident.cause == Cause.PFC_OFF
    remediation = incident.remediations.get()
    assert {c["command"] for c in remediation.commands} == {"set-qos"}
    assert {c["hostname"] for c in remediation.commands} == {"gpu003"}
    print(services.dry_run(remediation=remediation))
    services.approve_remediation(remediation=remediation, user=operator)
    _run_phase(incident, run_shards, Phase.FIX)
    age_changes(10)
    _run_phase(incident, run_shards, Phase.VERIFY)
    remediation.refresh_from_db()
    assert remediation.state == RemediationState.VERIFIED, remediation.outcome
    assert incident.state == IncidentState.RESOLVED
