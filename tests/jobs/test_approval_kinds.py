"""Kinds that carry an approval (a deployment's run, a cost policy's power-limit or tiering action, a runbook's
phases) start only through the object that holds it: POST /api/jobs/, the new-job page and job templates refuse them
with a 400 naming `kind`, and nothing is created or changed (issue 27, drills 2)."""

import pytest
from rest_framework import serializers

from apps.automation.models import JobTemplate
from apps.costs.choices import ActionState
from apps.costs.models import PolicyAction
from apps.jobs.kinds import KINDS, kind_choices, startable_kind_names
from apps.jobs.models import Job
from tests import factories

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_the_simulator")]
# repair-evidence: started by its repair, whose packet it writes (docs/health.md, "Repair and return").
APPROVAL_KINDS = {
    "deploy", "power-limit", "storage-tiering", "nccl-timeout", "gpu-utilisation", "training-interrupted",
    "repair-evidence", "bmc-power",
}  # fmt: skip


@pytest.fixture
def fleet(db):
    return factories.make_serving_fleet()


def test_every_kind_that_carries_an_approval_is_marked():
    assert {name for name, kind in KINDS.items() if kind.started_through} == APPROVAL_KINDS
    assert not APPROVAL_KINDS & set(startable_kind_names())
    assert not APPROVAL_KINDS & {name for name, _ in kind_choices()}


@pytest.mark.parametrize("kind", sorted(APPROVAL_KINDS))
def test_the_jobs_api_refuses_them_naming_kind(fleet, api_as, operator, kind):
    answer = api_as(operator).post(
        "/api/jobs/", {"kind": kind, "targets": {"nodes": ["gpu001"]}, "parameters": {}}, format="json"
    )
    assert answer.status_code == 400
    assert "start only through" in answer.json()["kind"][0]
    assert not Job.objects.exists()


def test_an_unapproved_power_limit_action_cannot_be_applied_through_the_jobs_api(fleet, api_as, operator):
    client = api_as(operator)
    policy = client.post(
        "/api/cost-policies/",
        {
            "name": "night",
            "scope": "service",
            "service": "chat",
            "parameters": {"power_limit_w": 450, "utilisation_below": 80, "window_minutes": 30},
        },
        format="json",
    ).json()
    action = client.post(f"/api/cost-policies/{policy['id']}/dry-run/").json()
    assert action["state"] == "proposed"

    answer = client.post(
        "/api/jobs/",
        {
            "kind": "power-limit",
            "targets": {"nodes": ["gpu001", "gpu002"]},
            "parameters": {"action": action["id"], "mode": "apply"},
        },
        format="json",
    )

    assert answer.status_code == 400 and "/api/cost-policies/" in answer.json()["kind"][0]
    assert not Job.objects.filter(kind="power-limit").exists()
    assert PolicyAction.objects.get(public_id=action["id"]).state == ActionState.PROPOSED


def test_a_deploy_job_for_a_draft_deployment_is_refused(fleet, api_as, operator):
    from apps.deployments import services as deployments
    from apps.jobs.services import TargetSpec

    draft = deployments.create_deployment(name="r01", targets=TargetSpec(nodes=("gpu001",)), user=operator)
    answer = api_as(operator).post(
        "/api/jobs/",
        {
            "kind": "deploy",
            "targets": {"nodes": ["gpu001"]},
            "parameters": {"deployment": str(draft.public_id), "run": 1},
        },
        format="json",
    )
    assert answer.status_code == 400 and "/api/deployments/" in answer.json()["kind"][0]
    assert not Job.objects.exists()


def test_the_new_job_page_neither_offers_nor_starts_them(fleet, browser_as, operator):
    client = browser_as(operator)
    page = client.get("/jobs/new/").content.decode()
    assert 'value="sleep"' in page and 'value="power-limit"' not in page and 'value="nccl-timeout"' not in page
    answer = client.post(
        "/jobs/new/", {"kind": "storage-tiering", "transport": "sim", "nodes": ["gpu001"], "parameters": "{}"}
    )
    assert answer.status_code == 200 and "storage-tiering" in answer.content.decode()
    assert not Job.objects.exists()


def test_job_templates_refuse_them_and_an_old_template_does_not_start(fleet, api_as, operator):
    from apps.automation import services as automation

    answer = api_as(operator).post(
        "/api/job-templates/",
        {"name": "fix", "kind": "nccl-timeout", "targets": {"nodes": ["gpu001"]}, "parameters": {}},
        format="json",
    )
    assert answer.status_code == 400 and "kind" in answer.json()
    old = JobTemplate.objects.create(name="old", kind="power-limit", targets={"nodes": ["gpu001"]}, parameters={})
    with pytest.raises(serializers.ValidationError) as refused:
        automation.run_template(template=old, requested_by=operator)
    assert "kind" in refused.value.detail
    assert not Job.objects.exists()
