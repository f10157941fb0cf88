"""The plan's options: one definition of the defaults, read by the services (and so the API), the wizard, the steps
and the artefacts."""

import dataclasses
from types import SimpleNamespace

import pytest
from django.urls import reverse

from apps.deployments import artefacts
from apps.deployments.context import node_contexts
from apps.deployments.forms import VersionsForm
from apps.deployments.options import PLAN_DEFAULTS
from apps.deployments.services import create_deployment
from apps.deployments.steps import STEPS
from apps.deployments.steps.base import Nic, NodeContext
from apps.jobs.services import TargetSpec


@pytest.fixture
def mtu_4200(monkeypatch):
    """The plan's default MTU changed in its one definition, and nowhere else."""
    monkeypatch.setitem(PLAN_DEFAULTS["network"], "mtu", 4200)


@pytest.mark.django_db
def test_a_new_plan_over_the_api_takes_its_defaults_from_the_one_definition(demo_cluster, operator, api_as, mtu_4200):
    response = api_as(operator).post(
        reverse("api:deployment-list"), {"name": "d", "targets": {"nodes": ["gpu031"]}}, format="json"
    )

    assert response.status_code == 201, response.json()
    assert response.json()["options"]["network"]["mtu"] == 4200
    assert response.json()["options"]["checkpoints"]["every_steps"] == PLAN_DEFAULTS["checkpoints"]["every_steps"]


@pytest.mark.django_db
def test_steps_fall_back_to_the_plan_defaults_where_a_stored_plan_lacks_a_value(demo_cluster, operator, mtu_4200):
    deployment = create_deployment(name="d", targets=TargetSpec(nodes=("gpu031",)), user=operator)
    context = node_contexts(deployment, with_topology=False)["gpu031"]
    older = dataclasses.replace(context, options={k: v for k, v in context.options.items() if k != "network"})

    fixes = STEPS["mtu"].fixes(older, None)

    assert fixes and all(fix.text().endswith(" mtu 4200") for fix in fixes)
    assert STEPS["rss"].fixes(older, None)[0].text().endswith(f" {PLAN_DEFAULTS['network']['rss_queues']}")


def test_the_wizard_and_the_artefacts_fill_missing_values_from_the_plan_defaults(mtu_4200):
    assert VersionsForm.initial_for(SimpleNamespace(options={}))["network__mtu"] == 4200
    assert artefacts.with_defaults({})["network"]["mtu"] == 4200


def test_an_option_the_plan_does_not_define_is_an_error_not_a_silent_none():
    node = NodeContext(
        hostname="n",
        node_id=None,
        sku="",
        gpu_count=0,
        hbm_reference_gb_per_s=0.0,
        hbm_datasheet_gb_per_s=0.0,
        nvlink_gb_per_s=0,
        pcie_gen=5,
        data_nics=(Nic("ens1np0", 400),),
        options={},
        criteria={},
    )

    assert node.option("network", "mtu") == PLAN_DEFAULTS["network"]["mtu"]
    with pytest.raises(KeyError):
        node.option("network", "mut")
