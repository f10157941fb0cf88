"""A plan whose stored options name what its nodes no longer have (an RDMA device of a NIC since removed) is not a
server error: the plan and its artefacts answer 409 naming the option and the device, and approving it is refused
with a 400 naming the option, changing nothing."""

import pytest
from django.urls import reverse

from apps.deployments import services
from apps.deployments.choices import DeploymentState
from apps.deployments.models import Approval
from apps.inventory.models import Nic
from apps.jobs.services import TargetSpec


@pytest.fixture
def stale(demo_cluster, operator):
    deployment = services.create_deployment(
        name="stale-hca",
        targets=TargetSpec(nodes=("gpu031",)),
        user=operator,
        option_edits={"nccl": {"ib_hca": "mlx5_0,mlx5_7"}},
    )
    # The node's last data NIC (mlx5_7) is removed after the plan was saved.
    Nic.objects.filter(node__hostname="gpu031", name="ens8np0").delete()
    return deployment


@pytest.mark.django_db
@pytest.mark.parametrize("action", ["plan", "artefacts"])
def test_reading_the_plan_names_the_stale_device(stale, operator, api_as, action):
    response = api_as(operator).get(reverse(f"api:deployment-{action}", args=[stale.public_id]))

    assert response.status_code == 409, response.content[:300]
    errors = response.json()["errors"]
    assert list(errors) == ["options.nccl.ib_hca"]
    assert "mlx5_7" in errors["options.nccl.ib_hca"][0] and "gpu031" in errors["options.nccl.ib_hca"][0]


@pytest.mark.django_db
def test_approving_the_stale_plan_is_refused_and_changes_nothing(stale, operator, api_as):
    response = api_as(operator).post(reverse("api:deployment-approve", args=[stale.public_id]), {}, format="json")

    assert response.status_code == 400, response.content[:300]
    assert "mlx5_7" in response.json()["options.nccl.ib_hca"][0]
    stale.refresh_from_db()
    assert stale.state == DeploymentState.DRAFT
    assert not Approval.objects.filter(deployment=stale).exists()


@pytest.mark.django_db
def test_the_wizard_sends_a_stale_plan_back_to_its_options(stale, operator, client):
    client.force_login(operator)

    page = client.post(reverse("deployment-wizard", args=[stale.public_id, "approve"]), {}, follow=True)

    assert page.status_code == 200
    assert page.redirect_chain[-1][0].endswith("/wizard/versions/")
    assert "mlx5_7" in page.content.decode()
    stale.refresh_from_db()
    assert stale.state == DeploymentState.DRAFT
