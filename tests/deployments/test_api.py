"""POST and PATCH /api/deployments/: every bad field at once, whichever layer refuses it (the request's shape, the
plan's checks, the generated files' checks), and nothing written."""

from apps.deployments import services
from apps.deployments.models import Deployment
from apps.jobs import services as job_services

URL = "/api/deployments/"
# Two rules of the options in two layers: the edits' own (a relative mount), the generated files' (the MTU's range).
BAD_OPTIONS = {"network": {"mtu": 99999}, "checkpoints": {"mount": "checkpoints"}}


def test_a_new_plan_names_every_bad_field_at_once(api_as, operator, demo_cluster):
    response = api_as(operator).post(
        URL,
        {"name": "bad name!", "targets": {"racks": ["r99"]}, "options": BAD_OPTIONS, "transport": "telnet"},
        format="json",
    )

    assert response.status_code == 400
    errors = response.json()
    # The name and transport are refused by their shape; the rack, the MTU and the mount by the plan's checks.
    assert {"name", "transport", "targets", "options.network.mtu", "options.checkpoints.mount"} <= set(errors), errors
    assert errors["targets"] == {"racks": ["No such rack: r99"]}
    assert not Deployment.objects.exists()


def test_a_change_to_a_draft_names_every_bad_field_at_once(api_as, operator, demo_cluster):
    draft = services.create_deployment(
        name="h200-r04", targets=job_services.TargetSpec(racks=("r04",)), user=operator, transport="sim"
    )
    before = (dict(draft.options), draft.stage, draft.updated)

    response = api_as(operator).patch(
        f"{URL}{draft.public_id}/",
        {"stage": "launch", "options": BAD_OPTIONS, "criteria": {"hbm_bandwidth": {"retries": 99}}},
        format="json",
    )

    assert response.status_code == 400
    errors = response.json()
    expected = {"stage", "options.network.mtu", "options.checkpoints.mount", "criteria.hbm_bandwidth.retries"}
    assert expected <= set(errors), errors
    draft.refresh_from_db()
    assert (draft.options, draft.stage, draft.updated) == before
