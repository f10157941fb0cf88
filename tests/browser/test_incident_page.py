"""The on-call engineer's incident, in a real browser against the live server and the simulator: a training job hit
by PFC off on one node has timed out; the incident page shows the runbook's evidence and ranked causes arriving over
its websocket (no reload), the engineer approves the PFC fix, sees the incident resolve with the job resumed from its
last good checkpoint, and finds the incident in the node's history."""

import re
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.accounts.choices import Role
from apps.diagnosis.choices import RemediationState
from apps.diagnosis.models import Incident
from apps.inventory.demo import DEMO, load_cluster
from apps.inventory.models import Node
from apps.simulator import services as sim
from apps.simulator.models import SimChange, SimFault
from apps.workloads.choices import TrainingState
from apps.workloads.models import TrainingJob
from apps.workloads.services import set_training_nodes
from tests import factories
from tests.browser.session import log_in

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]
HOSTS = ("gpu001", "gpu002", "gpu003", "gpu004")


@pytest.fixture
def live_server_env():
    # The re-check waits for training to show iterations again (the elastic agent's restart).
    return {"RACKPILOT_DIAGNOSIS_VERIFY_WAIT_SECONDS": "60"}


def _wait(condition, seconds=40):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError("timed out waiting")


def test_an_incident_is_diagnosed_live_fixed_on_approval_and_resolved(live_server_url, browser_page):
    load_cluster(DEMO)
    factories.make_user(role=Role.OPERATOR, username="oncall", password="correct-horse-battery")
    job = TrainingJob.objects.create(
        name="llm-pretrain",
        checkpoint_dir="/checkpoints/llm-pretrain",
        checkpoint_interval_steps=200,
        log_path="/var/log/train/llm-pretrain.log",
        state=TrainingState.RUNNING,
        started_at=timezone.now() - timedelta(hours=2),
    )
    set_training_nodes(job=job, nodes=[Node.objects.get(hostname=host) for host in HOSTS])
    fault = sim.inject_fault(node=Node.objects.get(hostname="gpu003"), kind="pfc_off", target="3")
    # It struck half an hour ago: every rank's NCCL watchdog (10 min) has fired since.
    SimFault.objects.filter(pk=fault.pk).update(created=timezone.now() - timedelta(minutes=30))

    page = browser_page
    page.set_default_timeout(40000)
    log_in(page, live_server_url, "oncall")
    page.goto(f"{live_server_url}/diagnosis/incidents/")
    page.select_option("select[name=training_job]", str(job.public_id))
    page.select_option("select[name=transport]", "sim")
    page.click("#incident-form button[type=submit]")
    page.wait_for_url("**/diagnosis/incidents/*-*/")
    # The one this form opened: the live server's training watch may open its own on the hang (every 60 s).
    incident = Incident.objects.get(public_id=page.url.rstrip("/").rsplit("/", 1)[-1])

    # Evidence and the ranked causes arrive while the page stays as it is: pushed over its socket, not polled.
    page.evaluate("window.stillThisPage = true")
    page.wait_for_function("window.rackpilotIncident.state.mode === 'live'")
    page.wait_for_function("document.querySelectorAll('#evidence tr.evidence').length > 0")
    page.wait_for_function("document.querySelector('#hypotheses tr.hypothesis')?.dataset.cause === 'pfc_off'")
    page.wait_for_selector("button.approve")
    assert page.evaluate("window.stillThisPage") is True, "the page was reloaded"
    live = page.evaluate("window.rackpilotIncident.state")
    assert live["polls"] == 0 and {"evidence", "ranking", "state"} <= set(live["pushed"]), live
    assert page.locator("#conn-state").inner_text() == "live"
    rows = page.locator("#evidence tr.evidence")
    assert rows.count() == incident.evidence.count()
    assert page.locator('#evidence tr.evidence[data-topic="pfc"][data-verdict="fault"]').count() >= 1
    assert "gpu003$ mlnx_qos -i ens1np0 --trust dscp --pfc 0,0,0,1,0,0,0,0" in page.locator("pre.dry-run").inner_text()

    page.click("button.approve")  # the fix runs as a job, then the re-check
    remediation = incident.remediations.get()
    _wait(lambda: Incident.objects.filter(pk=incident.pk, remediations__state=RemediationState.APPLIED).exists())
    # The elastic agent restarts the workers 30 s after the repair and they need 45 s to start: let that time have
    # passed (the model's clock is the repair's stored time) rather than keep the browser waiting for it.
    SimChange.objects.filter(node__hostname="gpu003").update(updated=timezone.now() - timedelta(minutes=3))
    page.wait_for_function("document.getElementById('incident-state').dataset.state === 'resolved'", timeout=60000)
    assert page.evaluate("window.rackpilotIncident.state.mode") == "live"
    remediation.refresh_from_db()
    assert remediation.state == RemediationState.VERIFIED
    outcome = page.locator("p.outcome").inner_text()
    assert re.search(r"training progresses again, resumed from the checkpoint of step \d+\.", outcome), outcome

    # The node's history has it.
    page.goto(f"{live_server_url}/nodes/{Node.objects.get(hostname='gpu003').public_id}/")
    row = page.locator(f'#node-incidents tr:has(a[href="/diagnosis/incidents/{incident.public_id}/"])')
    assert row.get_attribute("data-state") == "resolved"
